"""Make the labelling page's fixture: 40 recorded short answers from the licensed shared data, scored by the real
``bbwd batch``.

    python -m scripts.labels_fixture        # writes fixtures/labels_log.jsonl and fixtures/labels_scores.jsonl

The log holds 20 questions of SAC3's NQ-open set answered right and 20 answered wrong (gpt-3.5-turbo's answer and
its 10 samples at T = 1.0, Apache-2.0, intuit/sac3; none of them in the report's fixture), each with its manual
``label`` (1 = the answer is wrong): enough rows for a test to label 25 in the page with both classes, and to
calibrate from them. The run scores
them with the embedded teacher and the shipped black-box calibration on the CPU. Nothing else of ../shared/data goes
into a fixture.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scripts.batch_fixture import score_log

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
LOG = ROOT / "fixtures" / "labels_log.jsonl"
SCORES = ROOT / "fixtures" / "labels_scores.jsonl"
RIGHT, WRONG = range(100, 120), range(140, 160)  # the data's lines: its right answers first, then its wrong ones


def records() -> list[dict]:
    """The log's records, in the data's order."""
    lines = (DATA / "sac3_nq_open.jsonl").read_text(encoding="utf-8").splitlines()
    return [
        {"id": r["id"], "prompt": r["question"], "response": r["response"], "responses": r["samples"]}
        | {"label": r["label"]}
        for r in (json.loads(lines[i]) for i in [*RIGHT, *WRONG])
    ]


def make() -> None:
    """Write the log, then score it with ``bbwd batch`` (recorded samples, embedded teacher, CPU)."""
    score_log(records(), LOG, SCORES, "--all-scores")  # the panel shades the answer by its sentence scores
    print(f"wrote {LOG} and {SCORES}", file=sys.stderr)


if __name__ == "__main__":
    make()
