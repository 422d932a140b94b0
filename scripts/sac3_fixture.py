"""Make the labels' fixture: every record of SAC3's NQ-open set (250 gpt-3.5-turbo answers, their 10 recorded samples
and manual labels, Apache-2.0, intuit/sac3), scored by the real ``bbwd batch`` as a user scores a recorded log.

    python -m scripts.sac3_fixture        # writes fixtures/sac3_scores.jsonl (the log itself is not kept)

The tests of ``bbwd calibrate`` read these rows as a user's labelled log: what a few labels choose, and the doors'
verdicts from the file it writes. Nothing else of ../shared/data goes into a fixture.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from scripts.batch_fixture import score_log

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "sac3_nq_open.jsonl"
SCORES = ROOT / "fixtures" / "sac3_scores.jsonl"
K = 10


def records() -> list[dict]:
    """The log's records, in the data's order."""
    out = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        out.append(
            {"id": r["id"], "prompt": r["question"], "response": r["response"], "responses": r["samples"][:K]}
            | {"label": r["label"]}
        )
    return out


def make() -> None:
    """Write the log to a scratch folder, then score it with ``bbwd batch`` (recorded samples, CPU) into SCORES."""
    with tempfile.TemporaryDirectory() as scratch:
        score_log(records(), Path(scratch) / "sac3_log.jsonl", SCORES)
    print(f"wrote {SCORES}", file=sys.stderr)


if __name__ == "__main__":
    make()
