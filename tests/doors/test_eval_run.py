"""One evaluation row from hand-built samples: the judged answer, both label sources, answer-equivalence DSE."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from blackbox_wd.doors.eval.data import Dataset, Item
from blackbox_wd.doors.eval.run import default_max_tokens, protocol, run_fingerprint, score_item
from blackbox_wd.records import Sample, SampleSet
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings


class FixedSampler:
    """K samples 'rome', 'paris', 'rome' (the last cut at max tokens); the greedy answer 'paris'."""

    def __init__(self):
        self.calls = []

    def sample(self, messages, params):
        self.calls.append(params)
        if params.temperature == 0:
            return SampleSet([Sample("paris", finish_reason="stop")])
        return SampleSet(
            [
                Sample("rome", finish_reason="stop"),
                Sample("it is paris", finish_reason="stop"),
                Sample("rome", finish_reason="length"),
            ]
        )


@pytest.fixture()
def detector(tiny_llama):
    from blackbox_wd.teachers.forcing import HFTeacher

    return Detector(HFTeacher(*tiny_llama, name="tiny"), FixedSampler(), Settings(k=3, max_tokens=4, seed=7), lne=True)


ITEM = Item(
    id="q1",
    question="what is the capital of france",
    answers=["Paris"],
    kind="qa",
    source="t",
    messages=[{"role": "user", "content": "what is the capital of france"}],
    protocol="few-shot",
)


def test_greedy_answer_is_judged_and_the_first_sample_labelled_too(detector):
    row = score_item(detector, ITEM, "greedy", "answer")
    greedy = detector.sampler.calls[1]
    assert (greedy.k, greedy.temperature, greedy.top_p, greedy.max_tokens, greedy.seed) == (1, 0.0, 1.0, 4, 7)
    assert row["answer"] == "paris" and row["answer_finish_reason"] == "stop"
    assert (row["label"], row["label_em"]) == (0, 0)  # "paris": correct
    assert (row["label_first"], row["label_em_first"]) == (1, 1)  # "rome": a hallucination
    assert row["finish_reasons"] == ["stop", "stop", "length"]
    # answer-equivalence DSE: {rome, rome}, {it is paris} -> -(2/3 ln 2/3 + 1/3 ln 1/3) = 0.636514
    assert row["dse_judge"] == "answer" and row["dse"] == pytest.approx(0.636514, abs=1e-6)
    assert set(row["timings"]) == {"sample", "greedy", "teacher", "teacher_tokens", "transport", "baselines", "dse"}
    assert row["protocol"] == "few-shot" and row["label_from"] == "greedy" and row["style"] == "closed-book"


def test_first_sample_as_the_judged_answer(detector):
    row = score_item(detector, ITEM, "first", "none")
    assert len(detector.sampler.calls) == 1  # no greedy answer drawn
    assert row["answer"] == "rome" and row["label"] == 1 and "label_first" not in row
    assert "dse" not in row and row["dse_judge"] == "none" and "greedy" not in row["timings"]


def test_math_items_cluster_by_final_answer(detector):
    class MathSampler:
        def sample(self, messages, params):
            texts = (
                [r"so \boxed{\frac{1}{2}}"]
                if params.temperature == 0
                else [r"so x = \boxed{\frac{1}{2}}", r"hence \boxed{0.5}", r"the answer is \boxed{2}"]
            )
            return SampleSet([Sample(t) for t in texts])

    item = dataclasses.replace(ITEM, kind="math", answers=["0.5"], source="math500")
    row = score_item(dataclasses.replace(detector, sampler=MathSampler()), item, "greedy", "answer")
    # clusters {1/2, 0.5}, {2}: -(2/3 ln 2/3 + 1/3 ln 1/3)
    assert row["dse_judge"] == "final-answer" and row["dse"] == pytest.approx(0.636514, abs=1e-6)
    assert row["label"] == 0 and row["label_first"] == 0 and "label_em" not in row


def test_a_sampling_error_is_a_row():
    from blackbox_wd.errors import SamplingError

    class Failing:
        def sample(self, messages, params):
            raise SamplingError("HTTP 503", transient=True)

    row = score_item(Detector(None, Failing(), Settings()), ITEM, "greedy", "answer")
    assert row == {"id": "q1", "source": "t", "error": "HTTP 503", "transient": True}


def test_fingerprint_covers_the_protocol(detector):
    ds = Dataset([ITEM], {"closed-book": [dataclasses.replace(ITEM, id="ex")]}, {"q1": "h"}, "few-shot")
    base = run_fingerprint(detector, protocol(ds, "greedy", "answer"))
    others = [
        protocol(ds, "first", "answer"),
        protocol(ds, "greedy", "none"),
        protocol(ds, "greedy", "nli", "m"),
        protocol(dataclasses.replace(ds, protocol="zero-shot", exemplars={}), "greedy", "answer"),
        protocol(dataclasses.replace(ds, exemplars={"closed-book": [ITEM]}), "greedy", "answer"),
    ]
    fps = {run_fingerprint(detector, p) for p in others}
    assert len(fps) == len(others) and base not in fps
    assert protocol(ds, "greedy", "nli", "m") == {
        "prompts": "few-shot",
        "exemplars": {"closed-book": ["ex"]},
        "label_from": "greedy",
        "dse": "nli:m",
    }


def test_default_max_tokens_leaves_room_for_math():
    math_item = dataclasses.replace(ITEM, kind="math")
    assert default_max_tokens([ITEM]) == 128 and default_max_tokens([ITEM, math_item]) == 512
    assert math.isfinite(default_max_tokens([]))


def test_a_teacher_pass_that_raises_fails_only_the_item_that_caused_it(detector, monkeypatch):
    import asyncio

    from conftest import break_teacher_pass_on

    from blackbox_wd.doors.eval.run import score_items

    items = [
        ITEM,
        dataclasses.replace(ITEM, id="q2", messages=[{"role": "user", "content": "is rome big"}]),
        dataclasses.replace(ITEM, id="q3", messages=[{"role": "user", "content": "what is a city"}]),
    ]
    loop = asyncio.new_event_loop()
    clean = score_items(detector, items, "greedy", "answer", None, None, loop)
    break_teacher_pass_on(monkeypatch, "rome")
    rows = score_items(detector, items, "greedy", "answer", None, None, loop)
    loop.close()
    assert rows[1] == {"id": "q2", "source": "t", "error": "scoring failed: RuntimeError: boom", "transient": False}
    assert [rows[n]["avg_wd"] for n in (0, 2)] == pytest.approx([clean[n]["avg_wd"] for n in (0, 2)], rel=1e-6)
    assert [rows[n]["lne"] for n in (0, 2)] == pytest.approx([clean[n]["lne"] for n in (0, 2)], rel=1e-6)


def test_a_transient_error_is_recomputed_in_place_on_resume(detector, tmp_path):
    from blackbox_wd.doors.eval.run import evaluate
    from blackbox_wd.errors import SamplingError

    class FlakyOnce(FixedSampler):
        """Fails the prompt about Rome with an HTTP 503 on its first draw."""

        def sample(self, messages, params):
            if "rome" in messages[-1]["content"] and not getattr(self, "failed", False):
                self.failed = True
                raise SamplingError("HTTP 503", transient=True)
            return super().sample(messages, params)

    items = [
        ITEM,
        dataclasses.replace(ITEM, id="q2", messages=[{"role": "user", "content": "is rome big"}]),
        dataclasses.replace(ITEM, id="q3", messages=[{"role": "user", "content": "what is a city"}]),
    ]
    ds = Dataset(items, {}, {it.id: it.input_hash for it in items}, "few-shot")
    flaky = dataclasses.replace(detector, sampler=FlakyOnce(), group_size=2)
    first = evaluate(flaky, ds, tmp_path)
    assert [r["id"] for r in first] == ["q1", "q2", "q3"] and first[1]["transient"] is True
    again = evaluate(flaky, ds, tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in lines] == ["q1", "q2", "q3"] and "error" not in lines[1]  # in place, not appended
    assert lines[0] == first[0] and lines[2] == first[2] and again[1]["avg_wd"] == lines[1]["avg_wd"]
