"""Compute what is read (#71): a prompt whose verdict reads no teacher member is judged from its texts and never
forced; p, the flag and the members are the same on every row with and without ``all_scores`` (``--all-scores``),
whose rows are today's field for field; a log of short answers never loads the teacher; a re-judge and a fit refuse
rows that skipped it, naming ``--all-scores``.

The rows are real: ``fixtures/report_log.jsonl`` (16 short answers, 3 passages and a record short of K), scored by
the embedded teacher under the shipped black-box calibration."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from cli_support import run_cli

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.labelled import read_labelled
from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS
from blackbox_wd.doors.batch import BatchRunner, BatchSummary
from blackbox_wd.doors.calibrate import calibrate
from blackbox_wd.doors.rejudge import rejudge
from blackbox_wd.doors.serve.batcher import TeacherBatcher
from blackbox_wd.doors.serve.prometheus import Metrics
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Sample, SampleSet
from blackbox_wd.run.detector import Detector
from blackbox_wd.run.inputs import read_records
from blackbox_wd.run.texts import TEXT_MEMBERS
from blackbox_wd.settings import Settings

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "fixtures" / "report_log.jsonl"
SHORT, PASSAGES = range(1, 17), range(17, 20)  # its lines; line 20 has 3 responses, short of K = 10
# what only the teacher gives a row: null where it skipped the pass
TEACHER_FIELDS = ("avg_wd", "eigen_wd", "eigen_wd_fixed", "answer_wd", "sentences", "sentence_wd", "answer_unigram")
TEACHER_BASELINES = ("es", "er")


@pytest.fixture(scope="module")
def every() -> Detector:
    """The embedded teacher on recorded samples under the shipped black-box calibration, every prompt forced."""
    return Detector.from_settings(Settings(device="cpu", k=10), recorded=True, all_scores=True)


def batch_rows(detector: Detector, dst: Path, src: Path = LOG) -> tuple[list[dict], BatchSummary]:
    """The rows ``bbwd batch``'s local engine writes with the detector, and its summary."""
    summary = asyncio.run(BatchRunner(detector, sample_missing=False).run(src, dst))
    return [json.loads(line) for line in dst.open()], summary


def without(row: dict, *names: str) -> dict:
    """The row without ``names`` and its timings."""
    return {k: v for k, v in row.items() if k not in (*names, "timings")}


@pytest.fixture(scope="module")
def runs(every, tmp_path_factory):
    """The fixture log through batch: by default, with all scores, and as today (every prompt forced by the teacher
    pass, the stages called as before #71)."""
    folder = tmp_path_factory.mktemp("runs")
    default = batch_rows(replace(every, all_scores=False), folder / "default.jsonl")
    all_scores = batch_rows(every, folder / "all.jsonl")
    mp = pytest.MonkeyPatch()
    mp.setattr(Detector, "forced", lambda self, items, **kw: self.teacher_pass(items))
    try:
        today = batch_rows(replace(every, all_scores=False), folder / "today.jsonl")
    finally:
        mp.undo()
    return default, all_scores, today


def test_all_scores_rows_are_todays_field_for_field(runs):
    _, (every, _), (today, _) = runs
    assert len(every) == len(today) == 20
    assert [without(r) for r in every] == [without(r) for r in today]
    assert all(r["avg_wd"] is not None and r["eigen_wd"] >= 1 for r in every[:19])


def test_short_answers_skip_the_teacher_with_the_same_verdict(runs):
    (default, summary), (every, _), _ = runs
    for d, e in zip(default, every, strict=True):
        assert (d["p_hallucination"], d["flag"], d["members"], d["error"]) == (
            e["p_hallucination"],
            e["flag"],
            e["members"],
            e["error"],
        )
    for n in SHORT:
        d, e = default[n - 1], every[n - 1]
        assert set(d["members"]) <= TEXT_MEMBERS
        assert all(d[name] is None for name in TEACHER_FIELDS) and e["avg_wd"] is not None
        assert not set(TEACHER_BASELINES) & set(d["baselines"])
        assert without(d, *TEACHER_FIELDS, "baselines") == without(e, *TEACHER_FIELDS, "baselines")
        assert d["baselines"] == {k: v for k, v in e["baselines"].items() if k not in TEACHER_BASELINES}
    for n in PASSAGES:  # a passage's head reads AvgWD: forced, as with all scores
        assert "avg_wd" in default[n - 1]["members"]
        assert without(default[n - 1]) == without(every[n - 1])
    assert default[19]["error"] == every[19]["error"] and "3 response(s)" in default[19]["error"]
    assert summary.skipped == 16
    assert summary.teacher_line() is not None and summary.teacher_line().startswith("16 of 20 rows skipped")


def test_passages_under_the_heads_of_the_texts_alone_skip_the_teacher_with_the_same_verdict(every, tmp_path):
    """Another teacher's run is judged by the heads of the texts alone: a passage's read its judged answer's lexical
    surprise and LS, which the texts' stage gives as the teacher pass does; so the fixture's three passages skip the
    teacher, with the p, flag, members and surprise of the run that forces them."""
    texts = every.calibration.teacher_free()
    log = tmp_path / "passages.jsonl"
    log.write_text("".join(LOG.read_text().splitlines(keepends=True)[n - 1] for n in PASSAGES))
    default, summary = batch_rows(replace(every, calibration=texts, all_scores=False), tmp_path / "default.jsonl", log)
    forced, _ = batch_rows(replace(every, calibration=texts), tmp_path / "all.jsonl", log)
    assert summary.skipped == 3
    for d, e in zip(default, forced, strict=True):
        assert d["members"] == e["members"] == ["answer_unigram", "ls"]
        assert (d["p_hallucination"], d["flag"], d["answer_unigram"]) == (
            e["p_hallucination"],
            e["flag"],
            e["answer_unigram"],
        )
        assert isinstance(d["answer_unigram"], float) and d["avg_wd"] is None and d["sentences"] is None
        assert e["avg_wd"] is not None and len(e["sentences"]) > 1


def test_a_rejudge_refuses_a_skipped_row_that_a_teacher_head_would_read(runs, tmp_path):
    (default, _), _, _ = runs
    src = tmp_path / "scored.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in default))
    done = rejudge(src, tmp_path / "again.jsonl", "auto")  # the heads that skipped it read the texts alone
    assert done.judged == 19
    again = [json.loads(line) for line in (tmp_path / "again.jsonl").open()]
    assert [r["p_hallucination"] for r in again] == [r["p_hallucination"] for r in default]
    white = Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.json")  # every head reads ln EigenWD
    with pytest.raises(BBWDError, match=r"line 1: the row skipped the teacher pass.*--all-scores"):
        rejudge(src, tmp_path / "white.jsonl", white)


def test_a_full_fit_on_skipped_rows_names_all_scores_and_reads_them_with_it(runs, tmp_path):
    (default, _), (every, _), _ = runs
    src, full = tmp_path / "default.jsonl", tmp_path / "all.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in default[:19]))
    full.write_text("".join(json.dumps(r) + "\n" for r in every[:19]))
    assert read_labelled([src]).teacherless == 16 and read_labelled([full]).teacherless == 0
    with pytest.raises(BBWDError, match=r"^16 labelled rows skipped the teacher pass .*bbwd batch --all-scores$"):
        calibrate([src], tmp_path / "cal.json", refit="full", folds=2)


def test_serve_gives_the_same_verdict_with_and_without_all_scores(every):
    """The server's teacher queue (``TeacherBatcher``): the default judges short answers from their texts."""
    records = [r for r in read_records(LOG) if r.line in (1, 13, 17)]  # two short answers, a passage
    jobs = [(r.messages, SampleSet([Sample(x) for x in r.responses[:10]], answer=Sample(r.response))) for r in records]

    def verdicts(detector: Detector) -> list:
        async def go():
            with ThreadPoolExecutor(1) as model, ThreadPoolExecutor(1) as ot:
                batcher = TeacherBatcher(detector, model, ot, Metrics.create(), wait=0.05)
                batcher.start()
                out = await asyncio.gather(*(batcher.score(m, s) for m, s in jobs))
                await batcher.stop()
                return out

        return asyncio.run(go())

    default, all_scores = verdicts(replace(every, all_scores=False)), verdicts(every)
    assert [(r.p_hallucination, r.flag) for r in default] == [(r.p_hallucination, r.flag) for r in all_scores]
    assert [r.avg_wd is None for r in default] == [True, True, False]
    assert all(r.avg_wd is not None for r in all_scores)


def test_k_auto_stops_at_the_same_stage_with_the_same_verdicts(every, tmp_path):
    """``-k auto`` on recorded samples: each stage judged from the texts where its head reads them alone."""
    src = tmp_path / "log.jsonl"
    src.write_text("".join(line for n, line in enumerate(LOG.open(), start=1) if n in (1, 2, 13, 17)))
    auto = replace(every, settings=replace(every.settings, stop="settle"))
    default, _ = batch_rows(replace(auto, all_scores=False), tmp_path / "default.jsonl", src)
    all_scores, _ = batch_rows(auto, tmp_path / "all.jsonl", src)

    def verdicts(rows):
        return [
            (r["p_hallucination"], r["flag"], [(s["k"], s["p_hallucination"], s["settled"]) for s in r["stages"]])
            for r in rows
        ]

    assert verdicts(default) == verdicts(all_scores)
    assert [r["avg_wd"] is None for r in default] == [True, True, True, False]


def test_a_log_of_short_answers_never_loads_the_teacher(tiny_folder, tmp_path):
    """A teacher whose weights cannot be read: the default scores the short answers from their texts; with
    --all-scores the same run fails on loading it."""
    broken = tmp_path / "broken-teacher"
    shutil.copytree(tiny_folder, broken)
    for weights in broken.glob("*.safetensors"):
        weights.write_bytes(b"not a safetensors file")
    src = tmp_path / "short.jsonl"
    src.write_text("".join(line for n, line in enumerate(LOG.open(), start=1) if n in SHORT))

    def batch(*extra: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "blackbox_wd", "batch", str(src), "--teacher", str(broken), "--device", "cpu"]
        return subprocess.run(
            [*cmd, "-o", str(tmp_path / f"out{len(extra)}.jsonl"), *extra],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )

    done = batch()
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "out0.jsonl").open()]
    scored = [r for r in rows if r["error"] is None]  # the others are over the tiny teacher's context of 64 tokens
    assert len(rows) == 16 and len(scored) >= 8
    assert all(r["error"].endswith("over the teacher's context of 64") for r in rows if r["error"] is not None)
    assert all(r["avg_wd"] is None and 0 <= r["p_hallucination"] <= 1 for r in scored)
    assert all(set(r["members"]) <= TEXT_MEMBERS for r in scored)
    assert f"{len(scored)} of 16 rows skipped the teacher pass" in done.stderr
    failed = batch("--all-scores")
    out = tmp_path / "out1.jsonl"
    assert failed.returncode != 0 and (not out.exists() or not out.read_text().strip())


def test_scored_rows_judged_again_refuse_all_scores(tmp_path):
    scored = REPO / "fixtures" / "report_scores.jsonl"  # rows bbwd batch wrote
    code, err = run_cli("batch", str(scored), "-o", str(tmp_path / "again.jsonl"), "--all-scores")
    assert (code, err.strip()) == (
        2,
        "error: --all-scores forces a log's rows through the teacher: scored rows are judged again with no teacher "
        "pass (give the log instead)",
    )
    assert not (tmp_path / "again.jsonl").exists()
