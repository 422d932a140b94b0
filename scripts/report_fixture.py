"""Make the report's fixture: a small recorded log from the licensed shared data, scored by the real ``bbwd batch``.

    python -m scripts.report_fixture        # writes fixtures/report_log.jsonl and fixtures/report_scores.jsonl

The log holds 12 answers of SAC3's NQ-open set labelled right and 4 labelled wrong (gpt-3.5-turbo, Apache-2.0,
intuit/sac3), 3 WikiBio passages of SelfCheckGPT (GPT-3, CC BY-SA 3.0; label 1 where the human score is at least
0.5) and one record with 3 samples only, which batch makes an error row. Each record has 10 recorded samples
(``responses``), so the run scores them with the embedded teacher and the shipped black-box calibration (about two
minutes on a 2-core CPU). Nothing else is read: no other file of ../shared/data goes into a fixture.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scripts.batch_fixture import score_log

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
LOG = ROOT / "fixtures" / "report_log.jsonl"
SCORES = ROOT / "fixtures" / "report_scores.jsonl"
K = 10


def records() -> list[dict]:
    """The log's records, in order."""
    sac3 = [json.loads(line) for line in (DATA / "sac3_nq_open.jsonl").read_text(encoding="utf-8").splitlines()]
    right = [r for r in sac3 if r["label"] == 0][:12]
    wrong = [r for r in sac3 if r["label"] == 1][:4]
    out = [
        {"id": r["id"], "prompt": r["question"], "response": r["response"], "responses": r["samples"][:K]}
        | {"label": r["label"]}
        for r in sorted(right + wrong, key=lambda r: int(r["id"].rsplit(".", 1)[1]))
    ]
    wikibio = (DATA / "wikibio_gpt3_dev.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    for line in wikibio:
        r = json.loads(line)
        out.append(
            {
                "id": r["id"],
                "prompt": r["prompt"],
                "response": r["response"],
                "responses": r["samples"][:K],
                "label": int(r["human_score"] >= 0.5),
            }
        )
    short = sac3[-1]
    out.append({"id": short["id"], "prompt": short["question"], "response": short["response"]})
    out[-1]["responses"] = short["samples"][:3]
    return out


def make() -> None:
    """Write the log, then score it with ``bbwd batch`` (recorded samples, embedded teacher, CPU)."""
    score_log(records(), LOG, SCORES, "--all-scores")  # the page shows every score of a row
    print(f"wrote {LOG} and {SCORES}", file=sys.stderr)


if __name__ == "__main__":
    make()
