"""Loaders on the real evaluation files in shared/data and on the tiny fixture."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from blackbox_wd.doors.eval import data
from blackbox_wd.doors.eval.data import Item, load, user_prompt

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "tiny_qa.jsonl"


def shared_data_dir() -> Path:
    """$BBWD_DATA_DIR, else shared/data beside the repository."""
    env = os.environ.get("BBWD_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data"


def rows_of(path: Path) -> list[dict]:
    """The JSON objects of a JSONL file, one a line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


EXPECTED = {  # file, items, kind, source (from shared/data/README.md)
    "nq": ("nq_open_dev.jsonl", 3610, "qa", "nq_open"),
    "sciq": ("sciq_validation.jsonl", 1000, "qa", "sciq"),
    "math500": ("math500_test.jsonl", 500, "math", "math500"),
    "squad": ("squad_v1.1_dev.jsonl", 10570, "qa", None),
}


def test_data_dir_is_shared_data():
    """The tests point $BBWD_DATA_DIR at shared/data (conftest.py); the package itself knows no such folder."""
    assert data.data_dir().resolve() == shared_data_dir().resolve()
    assert (data.data_dir() / "README.md").is_file()


def test_a_short_name_is_looked_up_in_the_current_directory_without_bbwd_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("BBWD_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    assert data.data_dir() == tmp_path
    assert data.resolve_path("nq") == tmp_path / "nq_open_dev.jsonl"
    assert data.resolve_path("mine.jsonl") == Path("mine.jsonl")


EXEMPLARS = {  # the ids the few-shot rule picks: the last 5 records of each QA style, in file order
    "nq": {"closed-book": [f"nq_open.dev.{i}" for i in range(3605, 3610)]},
    "sciq": {
        "closed-book": [f"sciq.validation.{i}" for i in (967, 970, 983, 990, 992)],
        "reading": [f"sciq.validation.{i}" for i in range(995, 1000)],
    },
    "squad": {"reading": [f"5737aafd1c456719005744{x}" for x in ("fb", "fc", "fd", "fe", "ff")]},
    "math500": {},  # MATH keeps its zero-shot prompt
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_files_load_completely(name):
    filename, count, kind, source = EXPECTED[name]
    items = load(name, "zero-shot").items
    assert len(items) == count
    assert all(isinstance(it, Item) and it.kind == kind and it.answers and it.messages for it in items)
    assert len({it.id for it in items}) == count  # ids are unique
    if source:
        assert {it.source for it in items} == {source}
    # by path too, with a limit
    assert [it.id for it in load(shared_data_dir() / filename, "zero-shot", limit=3).items] == [
        it.id for it in items[:3]
    ]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_few_shot_exemplars_are_pinned_and_never_scored(name):
    count = EXPECTED[name][1]
    ds = load(name)
    assert ds.described() == {"prompts": "few-shot", "exemplars": EXEMPLARS[name]}
    shown = {i for ids in EXEMPLARS[name].values() for i in ids}
    assert len(ds.items) == count - len(shown)
    assert not shown & {it.id for it in ds.items}
    assert len(ds.hashes) == count  # resume knows every record, exemplars included
    for it in ds.items[:50]:
        turns = it.messages[:-1]
        if it.kind == "math":
            assert turns == []
            continue
        shots = ds.exemplars[it.style]
        assert [t["role"] for t in turns] == ["user", "assistant"] * 5
        assert [t["content"] for t in turns[1::2]] == [ex.answers[0] for ex in shots]
        assert all(f"Question: {ex.question.strip()}" in t["content"] for ex, t in zip(shots, turns[::2], strict=True))


def test_real_prompts():
    nq = load("nq", "zero-shot", limit=1).items[0]
    assert nq.id == "nq_open.dev.0"
    assert nq.messages == [
        {
            "role": "user",
            "content": "Answer the question briefly.\nQuestion: when was the last time anyone was on the moon",
        }
    ]
    assert nq.answers == ["14 December 1972 UTC", "December 1972"]
    assert load("nq", limit=1).items[0].messages[-1]["content"] == (
        "Answer with only the answer: a few words, not a sentence.\nQuestion: when was the last time anyone was on "
        "the moon"
    )
    assert load("nq", limit=1).items[0].messages[0]["content"] == (
        "Answer with only the answer: a few words, not a sentence.\nQuestion: what is the value of the currency in "
        "paraguay"
    )

    squad = load("squad", "zero-shot", limit=1).items[0].messages[-1]["content"]
    assert squad.startswith("Answer the question using the context.\nContext: Super Bowl 50 was")
    assert squad.endswith("\nQuestion: Which NFL team represented the AFC at Super Bowl 50?\nAnswer briefly.")
    squad = load("squad", limit=1).items[0].messages[-1]["content"]
    assert squad.startswith("Answer with only the answer: a few words, not a sentence.\nContext: Super Bowl 50 was")
    assert squad.endswith("\nQuestion: Which NFL team represented the AFC at Super Bowl 50?")

    for protocol in ("few-shot", "zero-shot"):
        math_item = load("math500", protocol, limit=1).items[0]
        assert math_item.kind == "math" and math_item.answers == [r"\left( 3, \frac{\pi}{2} \right)"]
        prompt = math_item.messages[0]["content"]
        assert len(math_item.messages) == 1 and "\\boxed{}" in prompt and prompt.endswith(math_item.question.strip())

    # SciQ: an empty support gives the no-context prompt, a non-empty one the context prompt
    sciq = load("sciq", "zero-shot").items
    assert sciq[0].style == "closed-book" and sciq[0].messages[0]["content"].startswith("Answer the question briefly.")
    raw = rows_of(shared_data_dir() / "sciq_validation.jsonl")
    with_context = next(i for i, r in enumerate(raw) if r["context"].strip())
    assert sciq[with_context].style == "reading"
    assert sciq[with_context].messages[0]["content"].startswith("Answer the question using the context.\nContext: ")


def test_require_context():
    raw = rows_of(shared_data_dir() / "sciq_validation.jsonl")
    ds = load("sciq", require_context=True)
    assert len(ds.items) == sum(bool(r["context"].strip()) for r in raw) - 5  # minus the reading exemplars
    assert all(it.context and it.style == "reading" for it in ds.items)
    assert [it.id for it in load("sciq", require_context=True, limit=3).items] == [it.id for it in ds.items[:3]]


def test_fixture_and_limits():
    ds = load(FIXTURE)
    assert [it.id for it in ds.items] == ["tiny-1", "tiny-2", "tiny-3", "tiny-4", "tiny-5"]  # blank line skipped
    assert [it.style for it in ds.items] == ["closed-book", "closed-book", "reading", "math", "closed-book"]
    assert [it.protocol for it in ds.items] == ["few-shot", "few-shot", "few-shot", "zero-shot", "few-shot"]
    assert ds.described()["exemplars"] == {
        "closed-book": ["tiny-6", "tiny-7", "tiny-8", "tiny-9", "tiny-10"],
        "reading": ["tiny-11", "tiny-12", "tiny-13", "tiny-14", "tiny-15"],
    }
    assert ds.items[2].messages[8:] == [
        {
            "role": "user",
            "content": "Answer with only the answer: a few words, not a sentence.\nContext: Caterpillars "
            "are the larvae of butterflies and moths and turn into them after metamorphosis."
            "\nQuestion: What do caterpillars turn into?",
        },
        {"role": "assistant", "content": "butterflies or moths"},
        {
            "role": "user",
            "content": "Answer with only the answer: a few words, not a sentence.\nContext: Plants take "
            "in "
            "carbon dioxide and water and, using light, make sugar and oxygen.\nQuestion: What "
            "gas do plants absorb for photosynthesis?",
        },
    ]
    zero = load(FIXTURE, "zero-shot")
    assert len(zero.items) == 15 and zero.exemplars == {} and {it.protocol for it in zero.items} == {"zero-shot"}
    assert zero.items[2].messages == [
        {
            "role": "user",
            "content": (
                "Answer the question using the context.\nContext: Plants take in carbon dioxide and water and, "
                "using light, make sugar and oxygen.\nQuestion: What gas do plants absorb for photosynthesis?\n"
                "Answer briefly."
            ),
        }
    ]
    assert zero.items[4].messages[0]["content"] == (
        "Answer the question briefly.\nQuestion: How many legs does a spider have?"
    )
    assert len(load(FIXTURE, limit=2).items) == 2
    assert load(FIXTURE, limit=0).items == []
    with pytest.raises(ValueError, match="protocol"):
        load(FIXTURE, "one-shot")


def test_env_override_and_errors(tmp_path, monkeypatch):
    (tmp_path / "nq_open_dev.jsonl").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("BBWD_DATA_DIR", str(tmp_path))
    assert len(load("nq").items) == 5
    with pytest.raises(FileNotFoundError):
        load("sciq")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "question": "q", "source": "s"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="answers"):
        load(bad)
    bad.write_text('{"id": "x", "question": "q", "answers": "not a list", "source": "s"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="list"):
        load(bad)


def test_math_prompt():
    item = Item(id="m", question="1+1?", answers=["2"], kind="math", source="math500")
    assert (
        user_prompt(item, "few-shot")
        == user_prompt(item, "zero-shot")
        == ("Solve the problem. Be concise and put the final answer in \\boxed{}.\nProblem: 1+1?")
    )


@pytest.mark.parametrize(
    "filename, n, kind, k, labels",
    [
        ("sac3_nq_open.jsonl", 250, "qa", 10, {"label"}),
        ("wikibio_gpt3_dev.jsonl", 119, "passage", 20, {"human_score", "sentences", "sentence_labels"}),
        ("gbu_popqa_gpt35.jsonl", 100, "passage", 10, {"unsupported_share", "claims", "claim_scores"}),
        ("gbu_factscore_llama3_70b.jsonl", 88, "passage", 10, {"unsupported_share", "claims", "claim_scores"}),
    ],
)
def test_recorded_samples_files_load_as_they_are(filename, n, kind, k, labels):
    raw = rows_of(shared_data_dir() / filename)
    ds = load(shared_data_dir() / filename)  # the default protocol does not apply: the file carries samples
    assert ds.recorded and ds.described() == {"prompts": "recorded"} and ds.exemplars == {}
    assert len(ds.items) == n and {it.kind for it in ds.items} == {kind}
    first, rec = ds.items[0], raw[0]
    assert first.messages == [{"role": "user", "content": rec.get("prompt", rec.get("question"))}]
    assert list(first.samples) == rec["samples"] and len(first.samples) == k and first.response == rec["response"]
    assert set(first.labels) == labels and all(first.labels[key] == rec[key] for key in labels - {"claims"})
    # claim_scores: the authors' per-claim scores, kept whole (each a number per claim) to compare with
    if "claims" in labels:  # each claim's text and label, in order (the judge's raw label is not kept)
        assert first.labels["claims"] == [{"text": c["text"], "label": c["label"]} for c in rec["claims"]]
    assert [it.id for it in load(shared_data_dir() / filename, limit=3).items] == [r["id"] for r in raw[:3]]


def test_recorded_record_errors_name_the_field(tmp_path):
    good = {"id": "a", "source": "s", "prompt": "Tell me", "samples": ["x", "y"], "response": "x", "label": 1}
    cases = [
        ({"samples": ["only one"]}, "'samples' must be a list of at least 2"),
        ({"samples": ["x", " "]}, "'samples' must be a list of at least 2 non-empty strings"),
        ({"label": 2}, "'label' must be 0 or 1"),
        ({"label": None, "human_score": float("nan")}, "'human_score' must be a number in [0, 1]"),
        ({"label": None, "unsupported_share": 1.5}, "'unsupported_share' must be a number in [0, 1]"),
        ({"label": None}, "needs 'label', 'human_score', 'unsupported_share' or 'claims'"),
        ({"label": None, "claims": [{"text": "x", "label": "maybe"}]}, "'claims' must be a list of {text, label}"),
        ({"prompt": ""}, "'prompt' (or 'question') must be a non-empty string"),
        ({"sentences": ["a."], "sentence_labels": ["wrong"]}, "'sentence_labels' must give one of"),
    ]
    for change, message in cases:
        path = tmp_path / "rec.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "b", **change}) + "\n")
        with pytest.raises(ValueError, match=re.escape(message)) as info:
            load(path)
        assert f"{path}:2:" in str(info.value)  # the record is named
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        json.dumps(good) + "\n" + json.dumps({"id": "q", "question": "Q?", "answers": ["A"], "source": "nq"}) + "\n"
    )
    with pytest.raises(ValueError, match="some records carry 'samples' and some do not"):
        load(mixed)
