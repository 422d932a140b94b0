"""The CLI run in-process, and a JSONL file read back: shared by the tests of the doors."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from blackbox_wd.doors.cli import main


def run_cli(*args: str) -> tuple[int, str]:
    """The CLI in-process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        main(list(args))
    return int(info.value.code or 0), err.getvalue()


def jsonl(path) -> list[dict]:
    """The JSON objects of a JSONL file, one a line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
