"""The teacher-state cache: a rerun forces nothing twice, and reads back exactly what was stored."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from blackbox_wd.clients.sampling import RecordedSamples
from blackbox_wd.doors.eval.data import load
from blackbox_wd.doors.eval.run import evaluate
from blackbox_wd.doors.eval.summary import timing_lines
from blackbox_wd.records import Sample, SampleSet
from blackbox_wd.run.detector import Detector
from blackbox_wd.run.stages import teacher_pass
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.forcing import HFTeacher
from blackbox_wd.teachers.statecache import StateCache

MESSAGES = [{"role": "user", "content": "what is the capital of france"}]
SAMPLES = SampleSet([Sample("paris"), Sample("it is paris"), Sample("rome")], answer=Sample("a big city"))


@pytest.fixture()
def teacher(tiny_llama):
    return HFTeacher(*tiny_llama, name="tiny")


def test_a_second_pass_reads_every_response_and_the_answer_from_the_cache(teacher, tmp_path):
    cache = StateCache(teacher, tmp_path)
    first = teacher_pass(teacher, [(MESSAGES, SAMPLES)], cache=cache)[0]
    forced = teacher.tokens.real
    second = teacher_pass(teacher, [(MESSAGES, SAMPLES)], cache=cache)[0]
    assert teacher.tokens.real == forced  # nothing ran
    assert (first.cached, second.cached) == (0, 4)
    assert first.teacher_tokens > 0 and second.teacher_tokens == 0
    for a, b in zip([*first.states, first.answer], [*second.states, second.answer], strict=True):
        np.testing.assert_array_equal(a.states, b.states)
        np.testing.assert_array_equal(a.last, b.last)
    assert len(cache) == 4


def test_log_probs_are_forced_when_the_cache_has_states_only(teacher, tmp_path):
    cache = StateCache(teacher, tmp_path)
    teacher_pass(teacher, [(MESSAGES, SAMPLES)], cache=cache)
    with_lp = teacher_pass(teacher, [(MESSAGES, SAMPLES)], logprobs=True, cache=cache)[0]
    assert with_lp.cached == 0 and all(s.logprobs is not None for s in with_lp.states)
    states_only = teacher_pass(teacher, [(MESSAGES, SAMPLES)], cache=cache)[0]  # now served by the fuller entries
    assert states_only.cached == 4 and all(s.logprobs is None for s in states_only.states)  # as a fresh pass
    np.testing.assert_array_equal(states_only.states[0].states, with_lp.states[0].states)
    again = teacher_pass(teacher, [(MESSAGES, SAMPLES)], logprobs=True, cache=cache)[0]
    assert again.cached == 4
    np.testing.assert_array_equal(again.states[0].logprobs, with_lp.states[0].logprobs)


def test_the_key_changes_with_the_layer_the_projection_and_the_ids(tiny_llama, tmp_path):
    a = StateCache(HFTeacher(*tiny_llama, name="tiny", layer=2), tmp_path)
    b = StateCache(HFTeacher(*tiny_llama, name="tiny", layer=3), tmp_path)
    c = StateCache(HFTeacher(*tiny_llama, name="tiny", layer=2, proj_seed=1), tmp_path)
    same = StateCache(HFTeacher(*tiny_llama, name="tiny", layer=2), tmp_path)
    keys = {x.key([1, 2], [3]) for x in (a, b, c)}
    assert len(keys) == 3 and same.key([1, 2], [3]) == a.key([1, 2], [3])
    assert a.key([1, 2], [3]) != a.key([1], [2, 3])


def test_entries_are_npz_without_pickles(teacher, tmp_path):
    cache = StateCache(teacher, tmp_path)
    teacher_pass(teacher, [(MESSAGES, SAMPLES)], logprobs=True, cache=cache)
    raw = cache._cache.get(next(iter(cache._cache.iterkeys())))
    with np.load(io.BytesIO(raw), allow_pickle=False) as f:
        assert sorted(f.files) == ["last", "logprobs", "states"]
        assert f["states"].dtype == np.float64 and f["states"].shape[1] == teacher.proj_dim


RECORDS = [
    {
        "id": "a",
        "source": "t",
        "question": "what is the capital of france",
        "answers": ["paris"],
        "response": "paris",
        "samples": ["paris", "it is paris", "rome", "a big city"],
        "label": 0,
    },
    {
        "id": "b",
        "source": "t",
        "question": "what is a big city",
        "answers": ["paris"],
        "response": "rome",
        "samples": ["rome", "paris", "no", "yes it is"],
        "label": 1,
    },
]


def test_an_eval_rerun_with_a_smaller_k_reads_the_states_of_the_first(teacher, tmp_path):
    path = tmp_path / "rec.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    data = load(path)
    cache = StateCache(teacher, tmp_path / "states")
    evaluate(Detector(teacher, RecordedSamples(), Settings(k=4), cache=cache, lne=True), data, tmp_path / "k4")
    forced = teacher.tokens.real
    rows = evaluate(Detector(teacher, RecordedSamples(), Settings(k=3), cache=cache, lne=True), data, tmp_path / "k3")
    assert teacher.tokens.real == forced
    assert [r["timings"]["teacher_cached"] for r in rows] == [4, 4]  # 3 samples and the judged answer
    fresh = evaluate(Detector(teacher, RecordedSamples(), Settings(k=3), lne=True), data, tmp_path / "fresh")
    for r, f in zip(rows, fresh, strict=True):
        assert "teacher_cached" not in f["timings"]
        for key in ("avg_wd", "eigen_wd", "answer_wd", "lne", "es"):
            assert r[key] == pytest.approx(f[key], rel=1e-5, abs=1e-6), key
    line = [x for x in timing_lines(rows) if "state cache" in x]
    assert line and "8 responses of 8" in line[0] and not [x for x in timing_lines(fresh) if "state cache" in x]


def test_no_lne_runs_the_teacher_to_the_layer_only(teacher, tmp_path):
    path = tmp_path / "rec.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    cache = StateCache(teacher, tmp_path / "states")
    with_lne = evaluate(
        Detector(teacher, RecordedSamples(), Settings(k=3), cache=cache, lne=True), load(path), tmp_path / "lne"
    )
    assert all("lne" in r for r in with_lne)
    # the cache now holds log-probs: a run without LNE still has none
    rows = evaluate(
        Detector(teacher, RecordedSamples(), Settings(k=3), cache=cache, lne=False), load(path), tmp_path / "out"
    )
    assert [r["timings"]["teacher_cached"] for r in rows] == [4, 4]
    assert all("lne" not in r and r["lne_source"] is None and "es" in r for r in rows)
    settings = json.loads((tmp_path / "out" / "settings.json").read_text())
    assert settings["protocol"]["lne"] == "off"
