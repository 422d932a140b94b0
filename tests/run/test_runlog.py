"""The one resume driver (``runlog.Resume``) of batch, eval and Ray, on a toy engine: transient rows redone in
place, an unfinished group computed again from its start, only the missing rows appended, each once."""

from __future__ import annotations

import asyncio
import json
from itertools import count
from pathlib import Path

import pytest

from blackbox_wd.errors import BBWDError
from blackbox_wd.run.runlog import Resume, RunLog, resume_point


def toy_log(path: Path) -> RunLog:
    return RunLog(path, "toy", "a toy row", lambda n, row: "key" in row)


def write_rows(path: Path, rows: list[dict], tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class ToyEngine:
    """Inputs 1..n (keys), scored in groups of ``size`` consecutive chosen inputs; records the groups it ran."""

    def __init__(self, n: int, size: int) -> None:
        self.n, self.size, self.groups = n, size, []

    def compute(self, skip, only, emit) -> None:
        chosen = [k for k in range(skip + 1, self.n + 1) if only is None or k in only]
        for start in range(0, len(chosen), self.size):
            group = chosen[start : start + self.size]
            self.groups.append(group)
            for k in group:
                emit({"key": k, "value": k * 10, "error": None}, f"extra{k}")

    async def acompute(self, skip, only, emit) -> None:
        self.compute(skip, only, emit)


def test_resume_point_is_the_start_of_the_first_group_not_done():
    assert resume_point(count(1), set(), 3) == 0
    assert resume_point(count(1), {1, 2, 3, 4}, 3) == 3  # group (4, 5, 6) unfinished: from its start
    assert resume_point(count(1), {1, 2, 3, 4, 5, 6}, 3) == 6
    assert resume_point(["a", "b", "c"], {"a", "b", "c"}, 2) == 3  # all done: nothing left


@pytest.mark.parametrize("asynchronous", [False, True])
def test_retries_in_place_recomputes_the_unfinished_group_and_appends_the_rest_once(tmp_path, asynchronous):
    path = tmp_path / "out.jsonl"
    earlier = [
        {"key": 1, "value": 10, "error": None},
        {"key": 2, "error": "HTTP 503", "transient": True},
        {"key": 3, "value": 30, "error": None},
        {"key": 4, "error": "bad line", "transient": False},
        {"key": 5, "error": "timeout", "transient": True},
    ]
    write_rows(path, earlier, tail='{"key": 6, "val')  # a torn last line
    resume = Resume(toy_log(path), "key")
    assert [r["key"] for r in resume.rows] == [1, 2, 3, 4, 5] and resume.retry == {2, 5}
    engine, retried, appended = ToyEngine(8, 2), [], []
    args = (count(1), 2)
    kwargs = {"retried": lambda row, x: retried.append((row["key"], x)), "appended": lambda r, x: appended.append(x)}
    if asynchronous:
        asyncio.run(resume.arun(engine.acompute, resume.steps(*args, **kwargs)))
    else:
        resume.run(engine.compute, resume.steps(*args, **kwargs))
    # the transient inputs in a group of their own; then from group (5, 6), whole, to the end
    assert engine.groups == [[2, 5], [5, 6], [7, 8]]
    assert retried == [(2, "extra2"), (5, "extra5")] and appended == ["extra6", "extra7", "extra8"]
    out = read_rows(path)
    assert [r["key"] for r in out] == list(range(1, 9))  # every input once, in order
    assert out[1] == {"key": 2, "value": 20, "error": None} and out[3]["error"] == "bad line"  # in place; final kept
    assert [r["key"] for r in resume.rows] == [1, 2, 3, 4, 5]  # the earlier rows, redone where transient


def test_the_check_refuses_before_anything_is_written(tmp_path):
    path = tmp_path / "out.jsonl"
    write_rows(path, [{"key": 1, "error": "HTTP 503", "transient": True}])
    before = path.read_bytes()

    def refuse(rows):
        raise BBWDError("other settings")

    with pytest.raises(BBWDError, match="other settings"):
        Resume(toy_log(path), "key", refuse)
    assert path.read_bytes() == before


def test_a_failing_engine_leaves_the_log_as_it_was_written(tmp_path):
    """A crash in the retry step rewrites nothing; a crash while appending keeps the rows appended so far."""
    path = tmp_path / "out.jsonl"
    write_rows(path, [{"key": 1, "error": "HTTP 503", "transient": True}])
    before = path.read_bytes()

    def crash(skip, only, emit):
        raise RuntimeError("engine died")

    with pytest.raises(RuntimeError):
        resume = Resume(toy_log(path), "key")
        resume.run(crash, resume.steps(count(1), 2))
    assert path.read_bytes() == before

    def half(skip, only, emit):
        if only is not None:
            return ToyEngine(1, 2).compute(skip, only, emit)
        emit({"key": 2, "value": 20, "error": None}, None)
        raise RuntimeError("engine died")

    with pytest.raises(RuntimeError):
        resume = Resume(toy_log(path), "key")
        resume.run(half, resume.steps(count(1), 2))
    assert [r["key"] for r in read_rows(path)] == [1, 2] and read_rows(path)[0]["error"] is None
