"""bbwd eval on recorded samples: scored as they are, never drawn; AnswerWD of the recorded response."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from blackbox_wd.clients.sampling import BatchSampler, RecordedSamples
from blackbox_wd.doors.eval.data import load
from blackbox_wd.doors.eval.main import plan
from blackbox_wd.doors.eval.run import evaluate
from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.transport import w2_to_each
from blackbox_wd.measure.wd import answer_wd
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings

RECORDS = [
    {
        "id": "a",
        "source": "t",
        "question": "who wrote middlemarch",
        "answers": ["George Eliot"],
        "response": "George Eliot wrote it.",
        "samples": ["George Eliot.", "It was George Eliot.", "Mary Ann Evans.", "Charles Dickens."],
        "label": 0,
    },
    {
        "id": "b",
        "source": "t",
        "question": "capital of australia",
        "answers": ["Canberra"],
        "response": "Sydney is the capital.",
        "samples": ["Canberra.", "Sydney.", "Melbourne, I think."],
        "label": 1,
    },
    {
        "id": "c",
        "source": "t",
        "question": "tallest mountain",
        "answers": ["Everest"],
        "response": "Everest.",
        "samples": ["Everest.", "K2."],
        "label": 0,
    },  # fewer than K = 3
]


class NeverSampler(BatchSampler):
    """A sampler that fails the test if anything draws from it."""

    teacher = None
    name = "never"

    def sample(self, messages, params):
        raise AssertionError("a recorded record reached the sampler")

    def sample_many(self, requests, params, answers=False):
        raise AssertionError("a recorded record reached the sampler")


@pytest.fixture()
def recorded(tmp_path):
    path = tmp_path / "rec.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    return load(path)


@pytest.fixture()
def teacher(tiny_llama):
    from blackbox_wd.teachers.forcing import HFTeacher

    return HFTeacher(*tiny_llama, name="tiny")


def test_recorded_records_never_reach_a_sampler(teacher, recorded, tmp_path):
    rows = evaluate(Detector(teacher, NeverSampler(), Settings(k=3), lne=True), recorded, tmp_path / "out")
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    a, b, c = rows
    assert a["responses"] == RECORDS[0]["samples"][:3]  # -k takes the first K
    assert b["responses"] == RECORDS[1]["samples"]
    assert (a["answer"], a["label"], a["label_from"], a["protocol"]) == (
        "George Eliot wrote it.",
        0,
        "recorded",
        "recorded",
    )
    assert b["label"] == 1 and "label_em" not in b  # labels come from the file, none are computed
    assert c["error"] == "field 'samples' has 2 sample(s); every record of this run is scored on K=3 (-k)"
    assert a["lne_source"] == "teacher" and all(math.isfinite(a[m]) for m in ("lne", "ls", "es", "er", "dse"))


def test_answer_wd_is_the_mean_w2_from_the_response_to_the_samples(teacher, recorded, tmp_path):
    row = evaluate(Detector(teacher, RecordedSamples(), Settings(k=3)), recorded, tmp_path / "out")[1]
    messages = recorded.items[1].messages
    states = teacher.encode(messages, [RECORDS[1]["response"], *RECORDS[1]["samples"]])
    expected = answer_wd(w2_to_each(states[0].states, [s.states for s in states[1:]]))
    assert row["answer_wd"] == pytest.approx(expected, rel=1e-6) and row["answer_wd"] > 0
    np.testing.assert_allclose(row["D"], np.asarray(row["D"]).T)  # the answer is not one of D's responses
    assert len(row["D"]) == 3


def test_recorded_runs_report_no_target_and_no_sampling(teacher, recorded, tmp_path):
    evaluate(Detector(teacher, RecordedSamples(), Settings(k=3), lne=True), recorded, tmp_path / "out")
    reported = json.loads((tmp_path / "out" / "settings.json").read_text())
    assert (
        reported["target"],
        reported["white_box"],
        reported["temperature"],
        reported["top_p"],
        reported["max_tokens"],
        reported["seed"],
    ) == ("recorded", False, None, None, None, None)
    assert reported["protocol"] == {"prompts": "recorded", "label_from": "recorded", "dse": "answer"}
    sampled = Detector(teacher, NeverSampler(), Settings(k=3)).reported_settings()
    assert sampled["target"] == "smollm2-135m" and sampled["fingerprint"] != reported["fingerprint"]
    with pytest.raises(BBWDError):
        RecordedSamples().sample([{"role": "user", "content": "hi"}], Settings().sampling())


def test_a_target_is_refused_for_recorded_data(recorded, tmp_path):
    path = tmp_path / "rec.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    with pytest.raises(BBWDError, match="--target: .* carries its samples"):
        plan(str(path), tmp_path / "out", {"target": "gpt-4o-mini"})
    assert plan(str(path), tmp_path / "out", {"k": 3}).label_from == "recorded"


def test_passages_get_pearson_and_spearman_and_no_answer_dse(teacher, tmp_path):
    path = tmp_path / "bio.jsonl"
    texts = [
        "He was a poet born in Leeds.",
        "He was a painter from Paris.",
        "She was a judge in Rome.",
        "He was a poet and a critic.",
    ]
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"p{i}",
                    "source": "bio",
                    "prompt": f"A passage about person {i}:",
                    "response": texts[i],
                    "samples": texts[i:] + texts[:i],
                    "human_score": i / 3,
                }
            )
            + "\n"
            for i in range(4)
        ),
        encoding="utf-8",
    )
    rows = evaluate(Detector(teacher, RecordedSamples(), Settings(k=3)), load(path), tmp_path / "out")
    assert {r["dse_judge"] for r in rows} == {"none (passage)"} and all("dse" not in r for r in rows)
    assert [r["human_score"] for r in rows] == [0.0, 1 / 3, 2 / 3, 1.0]
    from blackbox_wd.doors.eval.outputs import write_outputs

    paths = write_outputs(rows, tmp_path / "out", n_boot=50)
    text = paths["summary"].read_text()
    assert "## Label `human_score` (continuous)" in text and "| AnswerWD |" in text and "roc" not in paths


PASSAGES = [  # WikiBio-like: the response's own sentences, labelled, and the passage's human score
    (["Paris is a big city.", "It is the capital of France."], ["accurate", "accurate"]),
    (
        ["Rome is the capital of France.", "It is a small city.", "Paris is big."],
        ["major_inaccurate", "minor_inaccurate", "accurate"],
    ),
    (
        ["Rome is a city of France.", "It is the capital.", "It is no city.", "Yes, it is small."],
        ["major_inaccurate"] * 4,
    ),
]
BIO_SAMPLES = [
    "Paris is the capital of France. It is a big city.",
    "Paris is a city. It is the capital.",
    "The capital of France is Paris, a big city.",
]
SEVERITY_SCORE = {"accurate": 0.0, "minor_inaccurate": 0.5, "major_inaccurate": 1.0}


def _bio(tmp_path, records=None):
    path = tmp_path / "bio.jsonl"
    records = records or [
        {
            "id": f"w{i}",
            "source": "wikibio_gpt3",
            "prompt": "A Wikipedia passage about paris:",
            "response": " ".join(sentences),
            "samples": BIO_SAMPLES,
            "sentences": sentences,
            "sentence_labels": labels,
            "human_score": float(np.mean([SEVERITY_SCORE[lab] for lab in labels])),
        }
        for i, (sentences, labels) in enumerate(PASSAGES)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_records_sentences_are_the_ones_scored_and_come_back_beside_their_labels(teacher, tmp_path, monkeypatch):
    from blackbox_wd.doors.eval.outputs import write_outputs
    from blackbox_wd.measure.sentences import SentenceScore

    seen = []
    score_many = Detector.score_many

    def spy(self, items, entails_each=None):
        seen.extend(sample_set for _, sample_set in items)
        results = score_many(self, items, entails_each)
        for (_, sample_set), result in zip(items, results, strict=True):
            if result.sentences is None:  # no producer of sentence scores on this branch: stand in for it
                text, at, result.sentences = sample_set.answer.text, 0, []
                for n, sentence in enumerate(sample_set.answer_sentences):
                    at = text.index(sentence, at) + len(sentence)
                    result.sentences.append(SentenceScore(sentence, at - len(sentence), at, float(n)))
                result.sentence_wd = float(np.mean([s.score for s in result.sentences]))
        return results

    monkeypatch.setattr(Detector, "score_many", spy)
    rows = evaluate(Detector(teacher, RecordedSamples(), Settings(k=3)), load(_bio(tmp_path)), tmp_path / "out")
    assert [s.answer_sentences for s in seen] == [tuple(sentences) for sentences, _ in PASSAGES]
    assert [s.answer.text for s in seen] == [" ".join(sentences) for sentences, _ in PASSAGES]
    for row, (sentences, labels) in zip(rows, PASSAGES, strict=True):
        assert row["sentence_labels"] == labels and [s["text"] for s in row["sentences"]] == sentences
        assert all(row["answer"][s["start"] : s["end"]] == s["text"] for s in row["sentences"])
        scores = [s["score"] for s in row["sentences"] if s["score"] is not None]
        assert row["sentence_wd"] == pytest.approx(np.mean(scores))
    saved = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert [r["sentences"] for r in saved] == [r["sentences"] for r in rows]  # the scored ones, not the file's
    paths = write_outputs(rows, tmp_path / "out", n_boot=50)
    text = paths["summary"].read_text()
    assert "## Sentence level" in text and paths["sentence_pr"].exists()
    assert "| sentences scored (passages) | 9 (3) | 5 (2) | 9 (3) |" in text  # NonFact* leaves out w2 (wholly major)
    assert "| SentenceWD |" in text.split("## Label `human_score` (continuous)")[1]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sentence_labels": ["accurate", "accurate"]}, "'sentence_labels' has 2 labels for 3 'sentences'"),
        ({"response": None}, "'sentences' are the judged answer's: the record needs a 'response'"),
    ],
)
def test_sentence_labels_that_do_not_fit_the_sentences_are_refused(tmp_path, change, message):
    sentences, labels = PASSAGES[1]
    good = {
        "id": "w0",
        "source": "wikibio_gpt3",
        "prompt": "A passage:",
        "response": " ".join(sentences),
        "samples": BIO_SAMPLES,
        "sentences": sentences,
        "sentence_labels": labels,
        "human_score": 0.5,
    }
    path = _bio(tmp_path, [good, {**good, "id": "w1", **change}])
    with pytest.raises(BBWDError) as info:
        plan(str(path), tmp_path / "out", {"k": 3})
    assert str(info.value) == f"{path}:2: {message}"  # one line, the field and the record named
