"""Every teacher gets a verdict (#59): a teacher with no calibration of its own (here a model folder, the tiny random
Llama saved by ``conftest.tiny_folder``) is judged at every door by the shipped API file's heads that read the texts
alone, with one line saying so; ``bbwd calibrate`` refits those heads on its labelled rows.

These tests need the shipped ``smollm2-135m.api.json`` to hold such heads (``Calibration.teacher_free``) at K = 3
and K = 10, for every kind of answer."""

from __future__ import annotations

import json

import pytest
from cli_support import jsonl, run_cli
from serve_support import BbwdServe

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.choice import default_calibration_path
from blackbox_wd.calibration.members import TEACHER_FREE
from blackbox_wd.doors.cli import main

PROMPT = "What is the capital of Australia?"
RUN = ["-k", "3", "--max-tokens", "6", "--device", "cpu", "--seed", "1"]
TEXTS = "embedded smollm2-135m.api.json, its heads of the texts alone"


def note_of(teacher: str, black_box: bool = False) -> str:
    """The one line a run of ``teacher`` says of its calibration."""
    kind = "black-box runs with " if black_box else ""
    return (
        f"note: no calibration ships for {kind}teacher {teacher}: judged by the heads of smollm2-135m.api.json that "
        "read the texts alone (no teacher state), fitted on recorded answers of other models: its risk is a "
        "probability on that data"
    )


def texts_alone() -> Calibration:
    """The shipped API file's heads that read the texts alone."""
    texts = Calibration.load(default_calibration_path("smollm2-135m", white_box=False)).teacher_free()
    assert texts is not None, "the shipped API file has no heads that read the texts alone"
    return texts


def notes(err: str) -> list[str]:
    """The lines of stderr that are notes."""
    return [line for line in err.splitlines() if line.startswith("note:")]


def score(capsys, *args: str) -> tuple[str, str]:
    """``bbwd score ARGS`` in-process: (stdout, stderr); exit code 0."""
    with pytest.raises(SystemExit) as info:
        main(["score", *args])
    out = capsys.readouterr()
    assert not info.value.code, out.err
    return out.out, out.err


def test_the_shipped_api_file_has_heads_of_the_texts_alone_at_every_k_and_kind():
    texts = texts_alone()
    assert texts.is_teacher_free and texts.sentence is None and texts.claim is None
    assert {3, 10} <= set(texts.ks)
    assert {h.kind for h in texts.heads} >= {"phrase", "sentence", "passage"}
    assert all(set(h.members) <= set(TEACHER_FREE) for h in texts.heads)


@pytest.mark.slow
def test_score_with_a_folder_teacher_prints_a_risk_and_one_note(tiny_folder, capsys):
    out, err = score(capsys, "--teacher", tiny_folder, *RUN, "--json", PROMPT)
    result = json.loads(out)
    assert 0.0 <= result["p_hallucination"] <= 1.0 and isinstance(result["flag"], bool)
    assert set(result["calibration"]["members"]) <= set(TEACHER_FREE)
    assert result["calibration"]["origin"] == TEXTS and result["calibration"]["id"] == texts_alone().id
    assert notes(err) == [note_of(tiny_folder)]
    out, err = score(capsys, "--teacher", tiny_folder, *RUN, PROMPT)  # as a reader sees it
    text = " ".join(out.split())  # as wrapped to the terminal's width
    assert f"calibration: {TEXTS}, fitted on sac3_nq_open (250)" in text and "risk 0." in text
    assert "\nfrom: " in out
    assert notes(err) == [note_of(tiny_folder)]


def recorded_log(path) -> None:
    """Two recorded records of ten samples each: one whose samples agree, one whose samples scatter."""
    records = [
        {"id": "a", "prompt": "What is 2 + 2?", "response": "4", "responses": ["4"] * 9 + ["5"]},
        {"id": "b", "prompt": "Who wrote Middlemarch?", "response": "Dickens", "responses": list("abcdefghij")},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.mark.slow
def test_batch_of_recorded_samples_with_a_folder_teacher_gives_every_row_a_risk(tiny_folder, tmp_path):
    recorded_log(tmp_path / "log.jsonl")
    code, err = run_cli(
        "batch", str(tmp_path / "log.jsonl"), "-o", str(tmp_path / "out.jsonl"), "--teacher", tiny_folder
    )
    assert code == 0, err
    assert notes(err) == [note_of(tiny_folder, black_box=True)]
    rows = jsonl(tmp_path / "out.jsonl")
    assert [r["error"] for r in rows] == [None, None]
    assert all(0.0 <= r["p_hallucination"] <= 1.0 and isinstance(r["flag"], bool) for r in rows)
    assert all(set(r["members"]) <= set(TEACHER_FREE) for r in rows)
    assert {r["calibration"] for r in rows} == {texts_alone().id}
    assert rows[0]["p_hallucination"] < rows[1]["p_hallucination"]  # nine of ten alike, against ten unlike


@pytest.mark.slow
def test_batch_of_recorded_samples_with_gemma_as_the_teacher_gives_every_row_a_risk(tmp_path):
    """#59's door: ``bbwd batch LOG -o OUT --teacher gemma3-270m`` with no other option (the bundled Gemma-3-270m)."""
    recorded_log(tmp_path / "log.jsonl")
    out = str(tmp_path / "out.jsonl")
    code, err = run_cli("batch", str(tmp_path / "log.jsonl"), "-o", out, "--teacher", "gemma3-270m")
    assert code == 0, err
    assert notes(err) == [note_of("gemma3-270m", black_box=True)]
    rows = jsonl(tmp_path / "out.jsonl")
    assert [r["error"] for r in rows] == [None, None] and {r["settings"]["teacher"] for r in rows} == {"gemma3-270m"}
    assert all(0.0 <= r["p_hallucination"] <= 1.0 and isinstance(r["flag"], bool) for r in rows)
    assert all(set(r["members"]) <= set(TEACHER_FREE) for r in rows)
    assert {r["calibration"] for r in rows} == {texts_alone().id}


@pytest.mark.slow
def test_eval_of_recorded_samples_with_a_folder_teacher_judges_every_prompt(tiny_folder, tmp_path):
    records = [
        {
            "id": "a",
            "source": "t",
            "prompt": "What is 2 + 2?",
            "answers": ["4"],
            "samples": ["4"] * 9 + ["5"],
            "label": 0,
        },
        {
            "id": "b",
            "source": "t",
            "prompt": "Who wrote it?",
            "answers": ["Eliot"],
            "samples": list("abcdefghij"),
            "label": 1,
        },
    ]
    data = tmp_path / "recorded.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    args = ("eval", "--data", str(data), "-o", str(tmp_path / "eval"), "--device", "cpu", "--no-lne", "--no-cache")
    code, err = run_cli(*args, "--teacher", tiny_folder)
    assert code == 0, err
    assert notes(err) == [note_of(tiny_folder, black_box=True)]
    rows = jsonl(tmp_path / "eval" / "results.jsonl")
    assert all(0.0 <= r["p_hallucination"] <= 1.0 and isinstance(r["flag"], bool) for r in rows), rows
    assert {r["calibration"] for r in rows} == {texts_alone().id}


@pytest.mark.slow
def test_serve_with_a_folder_teacher_returns_a_risk_and_says_the_note_once(tiny_folder, tmp_path):
    with BbwdServe(["--teacher", tiny_folder, *RUN], tmp_path / "serve.log", token=None) as server:
        got = server.client().chat.completions.create(model=tiny_folder, messages=[{"role": "user", "content": PROMPT}])
    bbwd = got.model_extra["bbwd"]
    assert 0.0 <= bbwd["p_hallucination"] <= 1.0 and isinstance(bbwd["flag"], bool)
    assert notes((tmp_path / "serve.log").read_text()) == [note_of(tiny_folder)]


@pytest.mark.slow
def test_calibrate_refits_the_heads_of_the_texts_alone_for_a_folder_teacher(tiny_folder, tmp_path):
    """Rows scored with a teacher that has no file of its own: ``--suggest`` picks from their risk, and a refit of
    the heads of the texts alone is written (a calibration of the texts alone again: it judges any teacher)."""
    records = []
    for i in range(40):
        same = i % 2 == 0
        samples = [f"{i}"] * 9 + [f"{i + 1}"] if same else [f"{i + d} or so" for d in range(10)]
        records.append({"id": str(i), "prompt": f"What is {i}?", "response": str(i), "responses": samples})
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    code, err = run_cli(
        "batch", str(tmp_path / "log.jsonl"), "-o", str(tmp_path / "scores.jsonl"), "--teacher", tiny_folder
    )
    assert code == 0, err
    code, err = run_cli(
        "calibrate", "--suggest", "30", str(tmp_path / "scores.jsonl"), "-o", str(tmp_path / "pick.jsonl")
    )
    assert code == 0 and err.startswith(f"wrote {tmp_path / 'pick.jsonl'}: 30 of 40 scored rows"), err
    rows = jsonl(tmp_path / "scores.jsonl")
    with (tmp_path / "labelled.jsonl").open("w", encoding="utf-8") as f:
        for n, row in enumerate(rows):
            f.write(json.dumps({**row, "label": n % 2}) + "\n")  # the scattered ones hallucinated
    code, err = run_cli("calibrate", str(tmp_path / "labelled.jsonl"), "-o", str(tmp_path / "mine.json"))
    assert code == 0, err
    mine = Calibration.load(tmp_path / "mine.json")
    assert mine.fitted_on.refit == f"map of {TEXTS} ({texts_alone().id})"
    assert mine.is_teacher_free and mine.settings["teacher"] == tiny_folder
    assert "(95%, exact binomial) on 20 correct rows" in err, err
