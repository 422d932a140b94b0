"""Resume never mixes runs: other settings or another input are refused; transient errors are retried."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.doors.batch import BatchRunner
from blackbox_wd.errors import BBWDError
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.forcing import HFTeacher

LINES = [
    {"prompt": "what is the capital of france", "responses": ["paris", "it is rome"]},
    {"prompt": "is rome big", "responses": ["yes", "no a small city"]},
    {"prompt": "bad", "responses": "not a list"},
    {"prompt": "what is it", "responses": ["a city", "paris"]},
]


def run(tiny_llama, src, dst, **settings):
    teacher = HFTeacher(*tiny_llama, name="tiny")
    detector = Detector(teacher, LocalSampler(teacher), Settings(**{"k": 2, "device": "cpu", **settings}))
    return asyncio.run(BatchRunner(replace(detector, group_size=2), sample_missing=False).run(src, dst))


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_other_settings_are_refused_and_the_file_kept(tiny_llama, tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write(src, LINES)
    run(tiny_llama, src, dst)
    before = dst.read_bytes()
    for change in ({"alpha": 1e-2}, {"seed": 1}, {"max_tokens": 7}, {"temperature": 1.0}, {"k": 3}):
        with pytest.raises(BBWDError, match="was written with other settings"):
            run(tiny_llama, src, dst, **change)
        assert dst.read_bytes() == before
    summary = run(tiny_llama, src, dst, concurrency=3, token_budget=99)  # these change no score
    assert summary.records == 0 and summary.resumed_from == 4 and dst.read_bytes() == before


def test_another_input_is_refused_and_a_grown_one_resumed(tiny_llama, tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write(src, LINES[:3])
    run(tiny_llama, src, dst)
    before = dst.read_bytes()
    other = tmp_path / "other.jsonl"
    write(other, [LINES[1], LINES[0], LINES[2]])
    with pytest.raises(BBWDError, match="line 1 was computed from another input"):
        run(tiny_llama, other, dst)
    shorter = tmp_path / "short.jsonl"
    write(shorter, LINES[:2])
    with pytest.raises(BBWDError, match="has 3 lines, more than the input"):
        run(tiny_llama, shorter, dst)
    assert dst.read_bytes() == before
    write(src, LINES)  # the log grew: the first 3 lines are the same
    summary = run(tiny_llama, src, dst)
    rows = [json.loads(line) for line in dst.read_text().splitlines()]
    assert summary.records == 1 and dst.read_bytes().startswith(before) and [r["line"] for r in rows] == [1, 2, 3, 4]
    fresh = tmp_path / "fresh.jsonl"
    run(tiny_llama, src, fresh)
    strip = lambda rs: [{k: v for k, v in r.items() if k != "timings"} for r in rs]  # noqa: E731
    assert strip(rows) == strip([json.loads(line) for line in fresh.read_text().splitlines()])


def test_transient_errors_are_retried_on_resume_and_input_errors_are_not(tiny_llama, tmp_path):
    from api_support import FaultServer

    from blackbox_wd.clients.api import APISampler
    from blackbox_wd.clients.presets import Endpoint
    from blackbox_wd.clients.retry import RetryPolicy

    down = {"flaky": True}

    def outage(body):
        return "500" if down["flaky"] and "flaky" in json.dumps(body["messages"]) else None

    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write(
        src,
        [
            {"prompt": "what is it"},
            {"prompt": "a flaky one"},
            {"prompt": "bad", "responses": "x"},
            {"prompt": "is rome big"},
        ],
    )
    teacher = HFTeacher(*tiny_llama, name="tiny")
    with FaultServer(override=outage) as server:

        def run_once():
            sampler = APISampler(
                Endpoint("served-model", server.base_url, "sk-test-key-00000000", "K"),
                retry=RetryPolicy(budget=0.3, initial=0.02, cap=0.05, jitter=0.01),
                timeout=2.0,
            )
            settings = Settings(k=2, device="cpu", target="served-model", base_url=server.base_url, cache=False)
            try:
                return asyncio.run(
                    BatchRunner(Detector(teacher, sampler, settings, group_size=2), sample_missing=True).run(src, dst)
                )
            finally:
                sampler.close()

        first = run_once()
        rows = [json.loads(line) for line in dst.read_text().splitlines()]
        assert [r["error"] is None for r in rows] == [True, False, False, True]
        assert rows[1]["transient"] and "answered HTTP 500" in rows[1]["error"] and not rows[2]["transient"]
        assert first.errors == 2 and first.usage.requests > 2  # the failed requests are counted too
        served = len(server.received)

        down["flaky"] = False  # the outage is over: a rerun computes line 2 again, and only line 2
        second = run_once()
        again = [json.loads(line) for line in dst.read_text().splitlines()]
        assert second.retried == 1 and second.records == 1 and second.errors == 0
        assert [r["error"] is None for r in again] == [True, True, False, True]
        assert again[0] == rows[0] and again[2] == rows[2] and again[3] == rows[3]
        assert all("flaky" in json.dumps(r["body"]["messages"]) for r in server.received[served:])
