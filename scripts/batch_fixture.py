"""What the fixture scripts share: a log of recorded records written, then scored by the real ``bbwd batch``."""

from __future__ import annotations

import json
from pathlib import Path

from blackbox_wd.doors.cli import main


def score_log(records: list[dict], log: Path, scores: Path, *options: str) -> None:
    """Write ``records`` to ``log`` (one JSON object a line), then ``bbwd batch LOG -o SCORES --device cpu OPTIONS``
    (recorded samples, the embedded teacher where a row needs it, the shipped black-box calibration) in this process."""
    log.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    scores.unlink(missing_ok=True)
    try:
        main(["batch", str(log), "-o", str(scores), "--device", "cpu", *options])
    except SystemExit as exc:
        if exc.code:
            raise
