"""`bbwd eval` resumes only its own rows: same fingerprint, same input records; transient errors are redone."""

from __future__ import annotations

import json

import pytest

from blackbox_wd.errors import BBWDError
from blackbox_wd.eval.run import done_rows

HASHES = {"a": "1" * 16, "b": "2" * 16, "c": "3" * 16}


def rows_file(tmp_path, rows, tail=""):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return path


def row(id_, fp="f" * 16, **extra):
    return {"id": id_, "fingerprint": fp, "input_hash": HASHES[id_], **extra}


def test_keeps_own_rows_drops_transient_errors_and_a_torn_tail(tmp_path):
    path = rows_file(tmp_path, [row("a", avg_wd=1.0), row("b", error="HTTP 503", transient=True),
                                row("c", error="line: bad", transient=False)], tail='{"id": "x", "fing')
    kept = done_rows(path, "f" * 16, HASHES)
    assert [r["id"] for r in kept] == ["a", "c"]
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["a", "c"]


@pytest.mark.parametrize("rows,message", [
    ([row("a", fp="e" * 16)], "was written with other settings"),
    ([{**row("a"), "input_hash": "9" * 16}], "comes from another input"),
    ([{"id": "zz", "fingerprint": "f" * 16, "input_hash": "0" * 16}], "comes from another input"),
    ([{"id": "a", "avg_wd": 1.0}], "is not a bbwd eval row"),
])
def test_refuses_other_runs_and_leaves_the_file(tmp_path, rows, message):
    path = rows_file(tmp_path, rows)
    before = path.read_bytes()
    with pytest.raises(BBWDError, match=message):
        done_rows(path, "f" * 16, HASHES)
    assert path.read_bytes() == before
