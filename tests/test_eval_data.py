"""Loaders on the real evaluation files in shared/data and on the tiny fixture."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from blackbox_wd.eval import data
from blackbox_wd.eval.data import Item, build_prompt, load

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "fixtures" / "tiny_qa.jsonl"


def shared_data_dir() -> Path:
    """$BBWD_DATA_DIR, else shared/data beside the repository."""
    env = os.environ.get("BBWD_DATA_DIR")
    return Path(env) if env else REPO.parent / "shared" / "data"


EXPECTED = {  # file, items, kind, source (from shared/data/README.md)
    "nq": ("nq_open_dev.jsonl", 3610, "qa", "nq_open"),
    "sciq": ("sciq_validation.jsonl", 1000, "qa", "sciq"),
    "math500": ("math500_test.jsonl", 500, "math", "math500"),
    "squad": ("squad_v1.1_dev.jsonl", 10570, "qa", None),
}


def test_data_dir_is_shared_data():
    assert data.data_dir().resolve() == shared_data_dir().resolve()
    assert (data.data_dir() / "README.md").is_file()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_files_load_completely(name):
    filename, count, kind, source = EXPECTED[name]
    items = list(load(name))
    assert len(items) == count
    assert all(isinstance(it, Item) and it.kind == kind and it.answers and it.prompt for it in items)
    assert len({it.id for it in items}) == count  # ids are unique
    if source:
        assert {it.source for it in items} == {source}
    # by path too, with a limit
    assert [it.id for it in load(shared_data_dir() / filename, limit=3)] == [it.id for it in items[:3]]


def test_real_prompts():
    nq = next(load("nq", limit=1))
    assert nq.id == "nq_open.dev.0"
    assert nq.prompt == "Answer the question briefly.\nQuestion: when was the last time anyone was on the moon"
    assert nq.answers == ["14 December 1972 UTC", "December 1972"]

    squad = next(load("squad", limit=1))
    assert squad.prompt.startswith("Answer the question using the context.\nContext: Super Bowl 50 was")
    assert squad.prompt.endswith("\nQuestion: Which NFL team represented the AFC at Super Bowl 50?\nAnswer briefly.")

    math_item = next(load("math500", limit=1))
    assert math_item.kind == "math" and math_item.answers == [r"\left( 3, \frac{\pi}{2} \right)"]
    assert "\\boxed{}" in math_item.prompt and math_item.prompt.endswith(math_item.question.strip())

    # SciQ: an empty support gives the no-context prompt, a non-empty one the context prompt
    sciq = list(load("sciq"))
    assert sciq[0].prompt.startswith("Answer the question briefly.")
    raw = [json.loads(line) for line in open(shared_data_dir() / "sciq_validation.jsonl", encoding="utf-8")]
    with_context = next(i for i, r in enumerate(raw) if r["context"].strip())
    assert sciq[with_context].prompt.startswith("Answer the question using the context.\nContext: ")


def test_fixture_and_limits():
    items = list(load(FIXTURE))
    assert [it.id for it in items] == ["tiny-1", "tiny-2", "tiny-3", "tiny-4", "tiny-5"]  # blank line skipped
    assert [it.kind for it in items] == ["qa", "qa", "qa", "math", "qa"]
    assert items[2].prompt == ("Answer the question using the context.\nContext: Plants take in carbon dioxide "
                               "and water and, using light, make sugar and oxygen.\nQuestion: What gas do plants "
                               "absorb for photosynthesis?\nAnswer briefly.")
    assert items[4].prompt == "Answer the question briefly.\nQuestion: How many legs does a spider have?"
    assert len(list(load(FIXTURE, limit=2))) == 2
    assert list(load(FIXTURE, limit=0)) == []


def test_env_override_and_errors(tmp_path, monkeypatch):
    (tmp_path / "nq_open_dev.jsonl").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("BBWD_DATA_DIR", str(tmp_path))
    assert len(list(load("nq"))) == 5
    with pytest.raises(FileNotFoundError):
        list(load("sciq"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "question": "q", "source": "s"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="answers"):
        list(load(bad))
    bad.write_text('{"id": "x", "question": "q", "answers": "not a list", "source": "s"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="list"):
        list(load(bad))


def test_build_prompt_math():
    assert build_prompt({"question": "1+1?", "source": "math500"}) == (
        "Solve the problem. Be concise and put the final answer in \\boxed{}.\nProblem: 1+1?")
