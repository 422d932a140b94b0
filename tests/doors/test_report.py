"""``bbwd report`` without a browser: the rows read from a real batch run (fixtures/report_scores.jsonl, made by
scripts/report_fixture.py), a bad line named and the rest made, an empty file one error line, the header's figures,
the labels' section, the data block escaped and the texts cut to fit."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from blackbox_wd.calibration.evaluation.metrics import auroc
from blackbox_wd.calibration.evaluation.reliability import expected_calibration_error
from blackbox_wd.calibration.evaluation.verdicts import risks
from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS, Calibration
from blackbox_wd.doors.report.page import Limits, page_summary, payload, script_json, write_report
from blackbox_wd.doors.report.rows import answer_from_sentences, read_rows
from blackbox_wd.signals.baselines import ANSWER_PEERS, PEERS
from tests.cli_support import jsonl, run_cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SCORES = FIXTURES / "report_scores.jsonl"
LOG = FIXTURES / "report_log.jsonl"
DATA_BLOCK = re.compile(r'<script type="application/json" id="bbwd-data">(.*?)</script>', re.S)


def page_data(html: str) -> dict:
    """The rows the page embeds (its JSON data block)."""
    match = DATA_BLOCK.search(html)
    assert match is not None
    return json.loads(match.group(1))


@pytest.fixture(scope="module")
def scored() -> list[dict]:
    return jsonl(SCORES)


def test_the_fixture_is_a_real_batch_run(scored):
    log = jsonl(LOG)
    assert len(scored) == len(log) == 20
    assert [r["id"] for r in scored] == [r["id"] for r in log]
    assert sum(r["error"] is not None for r in scored) == 1  # the record with 3 samples
    assert "has 3 response(s)" in scored[-1]["error"]
    assert sum(bool(r["flag"]) for r in scored) >= 1
    assert {r.get("label") for r in scored} == {0, 1, None}  # the error row has none
    assert all(r["settings"]["target"] == "recorded" for r in scored)


def test_rows_read_with_their_log(scored):
    read = read_rows(SCORES, LOG)
    assert read.skipped == []
    rows = {r.id: r for r in read.rows}
    log = {r["id"]: r for r in jsonl(LOG)}
    passage = rows["wikibio_gpt3.0"]
    assert passage.prompt == log["wikibio_gpt3.0"]["prompt"]
    assert passage.answer == log["wikibio_gpt3.0"]["response"]
    assert passage.samples == log["wikibio_gpt3.0"]["responses"]
    assert len(passage.sentences) >= 5
    for mark in passage.sentences:  # each sentence's offsets find its text in the answer
        assert passage.answer[mark.start : mark.end] in {s["text"] for s in scored[16]["sentences"]}
    assert passage.members and set(passage.members) == set(scored[16]["members"])
    assert passage.members["avg_wd"] == pytest.approx(scored[16]["avg_wd"])


def test_without_the_log_the_answer_is_put_back_from_its_sentences(scored):
    read = read_rows(SCORES)
    row = next(r for r in read.rows if r.id == "wikibio_gpt3.0")
    assert row.prompt is None and row.samples == []
    response = jsonl(LOG)[16]["response"]
    assert row.answer is not None and len(row.answer) == scored[16]["sentences"][-1]["end"]
    assert row.answer.split() == response[: len(row.answer)].split()  # the same words; blanks for the gaps
    assert answer_from_sentences([{"text": "b", "start": 0, "end": 1}, {"text": "a", "start": 0, "end": 1}]) is None


def test_a_malformed_line_is_named_and_the_rest_make_the_page(tmp_path):
    lines = SCORES.read_text(encoding="utf-8").splitlines()
    bad = [*lines[:2], "{not json", *lines[2:4], '{"prompt": "a log line"}', "[1, 2]", *lines[4:]]
    scores = tmp_path / "scores.jsonl"
    scores.write_text("\n".join(bad) + "\n", encoding="utf-8")
    out = tmp_path / "page.html"
    code, err = run_cli("report", str(scores), "-o", str(out))
    assert code == 0, err
    named = [line for line in err.splitlines() if " line " in line]
    assert named == [
        f"{scores} line 3: not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        f"{scores} line 6: not a scored row (no avg_wd and no error field: is it a log line?)",
        f"{scores} line 7: not a scored row (a JSON list, not an object)",
    ]
    data = page_data(out.read_text(encoding="utf-8"))
    assert len(data["id"]) == 20
    assert data["line"][:4] == [1, 2, 4, 5]  # lines of the scored file
    assert "20 rows, " in err.splitlines()[-1]


@pytest.mark.parametrize("text", ["", "\n\n", '{"prompt": "x"}\n'])
def test_no_scored_rows_is_one_error_line(tmp_path, text):
    scores = tmp_path / "scores.jsonl"
    scores.write_text(text, encoding="utf-8")
    code, err = run_cli("report", str(scores), "-o", str(tmp_path / "page.html"))
    assert code == 2
    assert err.splitlines()[-1] == f"error: {scores} holds no scored rows (bbwd batch or bbwd eval output)"
    assert not (tmp_path / "page.html").exists()


def test_a_missing_file_and_the_input_as_output_are_refused(tmp_path):
    code, err = run_cli("report", str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "page.html"))
    assert (code, err.strip()) == (2, f"error: scored rows not found: {tmp_path / 'none.jsonl'}")
    copy = tmp_path / "scores.jsonl"
    shutil.copy(SCORES, copy)
    code, err = run_cli("report", str(copy), "-o", str(copy))
    assert code == 2 and "is an input" in err
    assert copy.read_bytes() == SCORES.read_bytes()
    code, err = run_cli("report", str(SCORES), "-o", str(tmp_path / "p.html"), "--log", str(tmp_path / "no.jsonl"))
    assert (code, err.strip()) == (2, f"error: --log not found: {tmp_path / 'no.jsonl'}")


def test_a_log_line_that_changed_is_named(tmp_path):
    log = tmp_path / "log.jsonl"
    lines = LOG.read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0].replace("1616", "1617")
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    notes: list[str] = []
    read = read_rows(SCORES, log, warn=notes.append)
    assert notes == [f"{log} line 1: not the line row 'sac3_nq_open.0' was scored from (its hash differs)"]
    assert read.rows[0].prompt is None and read.rows[1].prompt is not None


def test_the_header_states_the_shipped_calibration_and_sums(scored):
    read = read_rows(SCORES, LOG)
    summary = page_summary(read.rows, read.skipped)
    shipped = Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.api.json")
    assert scored[0]["calibration"] == shipped.id
    promise = summary.promise
    assert promise is not None and promise.id == shipped.id
    assert promise.origin == "shipped smollm2-135m.api.json"
    assert promise.threshold == shipped.operating_point.threshold
    assert promise.fpr == shipped.operating_point.fpr
    assert promise.fpr_interval == tuple(shipped.operating_point.fpr_interval)
    assert promise.heads == len(shipped.heads) and promise.note is None
    assert (summary.rows, summary.errors) == (20, 1)
    assert summary.flagged == sum(bool(r["flag"]) for r in scored)
    assert summary.samples == sum(r["n_samples"] for r in scored) == 190
    assert summary.target_tokens == sum(r["target_tokens"] for r in scored)
    assert summary.settings == {"teacher": "smollm2-135m", "target": "recorded", "k": "10"}
    assert sum(summary.histogram["all"]) == 19  # the error row has no risk
    assert sum(summary.histogram["flagged"]) == summary.flagged


def test_another_calibration_file_is_stated_with_a_note(tmp_path):
    read = read_rows(SCORES)
    other = PACKAGE_CALIBRATIONS / "smollm2-135m.json"
    summary = page_summary(read.rows, [], other)
    assert summary.promise is not None
    assert summary.promise.id == Calibration.load(other).id
    assert summary.promise.note == (
        f"the rows were judged by calibration {read.rows[0].calibration}, not by this file's ({summary.promise.id})"
    )


def test_labels_give_auroc_reliability_and_the_seen_rates(scored):
    read = read_rows(SCORES)
    summary = page_summary(read.rows, [])
    lab = summary.labelled
    done = [r for r in scored if r["error"] is None]
    assert lab is not None and lab.n == len(done) == 19
    assert lab.positives == sum(r["label"] for r in done)
    assert lab.auroc == pytest.approx(auroc([r["label"] for r in done], [r["p_hallucination"] for r in done]))
    negatives = [r["flag"] for r in done if r["label"] == 0]
    positives = [r["flag"] for r in done if r["label"] == 1]
    assert lab.fpr_seen == pytest.approx(sum(negatives) / len(negatives))
    assert lab.tpr_seen == pytest.approx(sum(positives) / len(positives))
    assert sum(b.n for b in lab.reliability) == 19
    for b in lab.reliability:  # (lo, hi], the first also holding 0
        lo, hi = b.x - 0.05, b.x + 0.05
        inside = [r for r in done if lo < r["p_hallucination"] <= hi or r["p_hallucination"] == lo == 0]
        assert b.n == len(inside)
        if inside:
            assert b.rate == pytest.approx(sum(r["label"] for r in inside) / len(inside))
    y = [r["label"] for r in done]
    assert lab.ece == pytest.approx(expected_calibration_error(y, [r["p_hallucination"] for r in done]))
    assert 0.0 < lab.ece < 1.0


def test_labels_put_lm_polygraphs_estimators_beside_on_the_same_rows(scored):
    """Each peer's AUROC on the labelled rows with a risk, as the rows' baselines give it, in PEERS' order; the
    fixture's real rows have all eight, and their AUROCs are not all one number."""
    done = [r for r in scored if r["error"] is None]
    y = [r["label"] for r in done]
    lab = page_summary(read_rows(SCORES).rows, []).labelled
    assert lab is not None
    assert [b.key for b in lab.beside] == [*PEERS, *ANSWER_PEERS]
    for b in lab.beside:
        assert b.auroc == pytest.approx(auroc(y, [r["baselines"][b.key] for r in done]))
    assert [b.name for b in lab.beside[:2]] == ["LexSim-R1", "LexSim-RL"]
    assert lab.beside[0].title == "LexSim ROUGE-1"
    assert len({round(b.auroc, 6) for b in lab.beside}) > 1


def test_an_estimator_some_labelled_row_lacks_is_not_beside(scored, tmp_path):
    rows = [dict(r) for r in scored]
    done = next(i for i, r in enumerate(rows) if r["error"] is None)
    rows[done]["baselines"] = {k: v for k, v in rows[done]["baselines"].items() if k != "ecc_jaccard"}
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    lab = page_summary(read_rows(path).rows, []).labelled
    assert lab is not None
    assert "ecc_jaccard" not in [b.key for b in lab.beside]
    assert [b.key for b in lab.beside] == [k for k in (*PEERS, *ANSWER_PEERS) if k != "ecc_jaccard"]


def test_rows_without_a_verdict_are_ranked_by_avg_wd(tmp_path, scored):
    bare = [{k: v for k, v in r.items() if k not in ("p_hallucination", "flag", "calibration")} for r in scored]
    path = tmp_path / "scores.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in bare), encoding="utf-8")
    read = read_rows(path)
    risk, source = risks(read.rows)
    assert source == "avg_wd rank"
    top = max(range(19), key=lambda i: scored[i]["avg_wd"])
    assert risk[top] == max(r for r in risk if r is not None) and risk[19] is None
    summary = page_summary(read.rows, [])
    assert summary.promise is None
    assert summary.labelled is not None and summary.labelled.auroc is not None
    assert summary.labelled.ece is None  # a rank is not a probability


def test_eval_rows_bring_their_prompt_samples_and_answer(tmp_path):
    row = {
        "id": "q1",
        "question": "Who wrote Moby-Dick?",
        "answer": "Herman Melville wrote it.",
        "responses": ["Melville.", "Herman Melville."],
        "avg_wd": 0.1,
        "sentences": [{"text": "Herman Melville wrote it.", "start": 0, "end": 25, "score": 0.2}],
        "label": 0,
    }
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (r,) = read_rows(path).rows
    assert (r.prompt, r.answer, r.samples, r.label) == (row["question"], row["answer"], row["responses"], 0)
    assert r.sentences[0].score == 0.2 and r.sentences[0].p is None
    assert r.settings is None
    # eval keeps the run's settings in settings.json beside its rows: read where its fingerprint is theirs
    settings = {"teacher": "smollm2-135m", "target": "recorded", "k": 2, "fingerprint": "2a809f4c08f064d8"}
    (tmp_path / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    assert read_rows(path).rows[0].settings is None  # the row has no fingerprint
    path.write_text(json.dumps(row | {"fingerprint": "2a809f4c08f064d8"}) + "\n", encoding="utf-8")
    (r,) = read_rows(path).rows
    assert r.settings == settings
    assert page_summary([r], []).settings == {"teacher": "smollm2-135m", "target": "recorded", "k": "2"}


def test_the_data_block_cannot_close_its_script():
    hostile = "</script><script>window.pwned=1</script>&\u2028\u2029"
    text = script_json({"a": hostile})
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == {"a": hostile}


def test_the_page_loads_nothing_from_the_network(tmp_path):
    out = tmp_path / "page.html"
    written = write_report(SCORES, out, LOG)
    html = out.read_text(encoding="utf-8")
    assert written.bytes == len(html.encode()) and written.rows == 20
    assert not re.search(r"<(script|img|iframe)[^>]*\bsrc=|<link\b|@import", html, re.I)
    assert html.count("<script") == 5  # the two data blocks, Tabulator, uPlot and the page's own
    data = page_data(html)
    assert data["prompt"][0] == jsonl(LOG)[0]["prompt"]
    assert data["risk"][0] == pytest.approx(jsonl(SCORES)[0]["p_hallucination"], rel=1e-3)


def test_texts_are_cut_to_fit_the_page(tmp_path):
    out = tmp_path / "page.html"
    full = write_report(SCORES, tmp_path / "full.html", LOG)
    small = write_report(SCORES, out, LOG, max_bytes=20_000)
    assert full.limits == Limits() and small.limits.answer < Limits().answer
    assert small.limits == Limits(prompt=500, answer=1000, sample=200, samples=2, claim=100)  # halved twice
    data = page_data(out.read_text(encoding="utf-8"))
    assert len(script_json(data).encode()) <= 20_000
    assert all(a is None or len(a) <= 1000 + 40 for a in data["answer"])
    assert max(len(s) for s in data["samples"] if s) == 2
    assert "texts cut to fit the page" in out.read_text(encoding="utf-8")
    # a sentence past the kept answer is left out, the others keep their offsets
    rows = read_rows(SCORES, LOG).rows
    kept = payload(rows, [r.p for r in rows], Limits(answer=100))
    assert all(s[1] <= 100 for sents in kept["sentences"] if sents for s in sents)


def test_the_labels_box_names_the_members_the_verdict_read(scored, tmp_path):
    """The fixture's 19 labelled rows with a risk: 16 short answers judged by the phrase heads (the answer's
    disagreement, LexSim ROUGE-1 and ROUGE-L, the answer's ROUGE-L), 3 passages by the passage heads: each member set
    the verdict read, with its count, most rows first."""
    from collections import Counter

    done = [r for r in scored if r["error"] is None and r["label"] is not None]
    lab = page_summary(read_rows(SCORES).rows, []).labelled
    assert lab is not None
    want = Counter(", ".join(r["members"]) for r in done).most_common(3)
    assert lab.reads == want and sum(n for _, n in want) <= 19 and want[0][1] >= 10
    write_report(SCORES, tmp_path / "page.html")
    assert f"{want[0][0]} ({want[0][1]})" in (tmp_path / "page.html").read_text(encoding="utf-8")
