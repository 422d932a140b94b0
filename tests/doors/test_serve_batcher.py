"""The cross-request teacher queue on the real embedded teacher: requests that arrive together share one
teacher pass and score exactly as ``Detector.score_many``; the pass runs on the model thread and OT on the OT
threads (never the event loop); a pass that raises fails only the request that caused it."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from conftest import break_teacher_pass_on

import blackbox_wd.run.stages as pipeline_module
from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.doors.serve.batcher import TeacherBatcher
from blackbox_wd.doors.serve.prometheus import Metrics
from blackbox_wd.doors.serve.service import _scoring_failed
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Sample, SampleSet
from blackbox_wd.run.detector import Detector
from blackbox_wd.run.result import Result
from blackbox_wd.settings import Settings

pytestmark = pytest.mark.slow

ITEMS = [
    ([{"role": "user", "content": "What is the capital of France?"}], ["Paris.", "It is Paris, the capital."]),
    ([{"role": "user", "content": "Name a colour."}], ["Blue.", "Red is a colour."]),
    ([{"role": "user", "content": "POISON: who wrote Hamlet?"}], ["Shakespeare.", "William Shakespeare."]),
]


@pytest.fixture
def one_thread():
    """Torch on one thread for the test (a shared 2-core machine), restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def items():
    return [(messages, SampleSet([Sample(r) for r in responses])) for messages, responses in ITEMS]


def run_batch(detector: Detector, jobs) -> tuple[list[Result | BaseException], Metrics]:
    """Submit the jobs together to a fresh batcher; their outcomes and its metrics."""
    metrics = Metrics.create()

    async def go():
        with (
            ThreadPoolExecutor(1, thread_name_prefix="bbwd-model") as model,
            ThreadPoolExecutor(2, thread_name_prefix="bbwd-ot") as ot,
        ):
            batcher = TeacherBatcher(detector, model, ot, metrics, wait=0.05)
            batcher.start()
            out = await asyncio.gather(*(batcher.score(m, s) for m, s in jobs), return_exceptions=True)
            await batcher.stop()
            return out

    return asyncio.run(go()), metrics


def test_requests_together_share_one_pass_off_the_event_loop(smollm_teacher, one_thread, monkeypatch):
    detector = Detector(smollm_teacher, LocalSampler(smollm_teacher), Settings(k=2, device="cpu"))
    threads: dict[str, set[str]] = {"teacher_pass_isolated": set(), "score_states": set()}
    for name in threads:  # the wiring's stages, which the batcher calls through its Detector
        real = getattr(pipeline_module, name)

        def spy(*args, _real=real, _name=name, **kw):
            threads[_name].add(threading.current_thread().name.rsplit("_", 1)[0])
            return _real(*args, **kw)

        monkeypatch.setattr(pipeline_module, name, spy)
    results, metrics = run_batch(detector, items())
    seen = {name: set(where) for name, where in threads.items()}  # before the reference below runs on this thread
    expected = detector.score_many(items())
    assert [r.avg_wd for r in results] == [e.avg_wd for e in expected]  # the same single pass: identical
    assert [r.eigen_wd for r in results] == [e.eigen_wd for e in expected]
    assert results[0].settings["fingerprint"] == detector.fingerprint
    assert seen == {"teacher_pass_isolated": {"bbwd-model"}, "score_states": {"bbwd-ot"}}
    batches = metrics.teacher_batch.collect()[0].samples
    assert {s.name: s.value for s in batches if s.name.endswith(("_count", "_sum"))} == {
        "bbwd_teacher_batch_requests_count": 1.0,
        "bbwd_teacher_batch_requests_sum": 3.0,
    }
    assert metrics.queue_depth.collect()[0].samples[0].value == 0


def test_a_pass_that_raises_fails_only_the_request_that_caused_it(smollm_teacher, one_thread, monkeypatch):
    detector = Detector(smollm_teacher, LocalSampler(smollm_teacher), Settings(k=2, device="cpu"))
    break_teacher_pass_on(monkeypatch, "POISON", "CUDA error: out of memory")  # shared and alone
    results, _ = run_batch(detector, items())
    assert isinstance(results[2], BBWDError)
    assert str(results[2]) == "teacher pass failed: RuntimeError: CUDA error: out of memory"
    err = _scoring_failed(results[2])  # the request's 500 says it once, not "scoring failed: teacher pass failed: ..."
    assert err.status == 500 and err.body()["error"]["message"] == str(results[2])
    alone = [detector.score_many([item])[0] for item in items()[:2]]
    assert [r.avg_wd for r in results[:2]] == pytest.approx([r.avg_wd for r in alone], rel=1e-6)
