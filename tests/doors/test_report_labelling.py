"""``bbwd report --suggest N``'s labelling mode in a real browser (the system Chromium, driven by Playwright), on the
40 recorded short answers of fixtures/labels_scores.jsonl (made by ``python -m scripts.labels_fixture``): the rows
asked first are those ``bbwd calibrate --suggest N`` picks; 20 labelled by keys and 5 by buttons, one undone, each
by the answer's manual label; a reload keeps them; "Download labels" saves them, and ``bbwd calibrate --labels``
fits on the file as it fits on the same labels written into the rows. A hostile row's panel shows its text inert.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.suggest import spread_picks
from blackbox_wd.doors.report import labelling as mode
from blackbox_wd.doors.report.rows import read_rows
from tests.cli_support import jsonl, run_cli
from tests.doors.test_report_page import HOSTILE, HOSTILE_ID

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SCORES = FIXTURES / "labels_scores.jsonl"
LOG = FIXTURES / "labels_log.jsonl"
N = 25  # rows suggested; all of them labelled, then the last undone
TRUTH = {r["id"]: r["label"] for r in jsonl(LOG)}  # the manual labels (1 = the answer is wrong)


def test_the_fixture_has_rows_of_both_classes_to_label():
    rows = jsonl(SCORES)
    assert [r["id"] for r in rows] == list(TRUTH)
    assert len(rows) == 40 and sum(TRUTH.values()) == 20
    assert all(r["error"] is None and isinstance(r["p_hallucination"], float) for r in rows)


def test_report_and_calibrate_suggest_the_same_rows(tmp_path):
    """One function picks for both (``suggest.suggested_rows``); the page's key is the file's content."""
    code, err = run_cli("calibrate", str(SCORES), "--suggest", "12", "-o", str(tmp_path / "to_label.jsonl"))
    assert code == 0, err
    rows = read_rows(SCORES).rows
    page = mode.labelling(SCORES, rows, 12)
    assert [rows[i].id for i in page.suggested] == [r["id"] for r in jsonl(tmp_path / "to_label.jsonl")]
    assert page.key == mode.content_key(SCORES) and len(page.key) == 16
    assert page.suggested == spread_picks(np.array([r.p for r in rows]), 12).tolist()  # every row has a p


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The page (``bbwd report --suggest 25``) and ``bbwd calibrate --suggest 25``'s rows to label."""
    out = tmp_path_factory.mktemp("labelling")
    code, err = run_cli("report", str(SCORES), "--log", str(LOG), "--suggest", str(N), "-o", str(out / "page.html"))
    assert code == 0, err
    code, err = run_cli("calibrate", str(SCORES), "--suggest", str(N), "-o", str(out / "to_label.jsonl"))
    assert code == 0, err
    return out


def opened(context: Any, page_file: Path) -> Any:
    """A page of ``context`` opened (its table built), with its console errors and exceptions collected."""
    pg = context.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    # nothing leaves the page: every request is the file itself or the download's blob
    pg.on("request", lambda r: None if r.url.startswith(("file:", "blob:")) else errors.append(f"request {r.url}"))
    pg.goto(page_file.as_uri())
    pg.wait_for_selector("body[data-ready='1']", timeout=30_000)
    pg.errors = errors
    return pg


def labelling(pg) -> str:
    """The id of the row whose panel is open (its ``data-labelling``)."""
    return pg.get_attribute("#labelling[data-labelling]", "data-labelling")


@dataclass
class Session:
    page: Any
    asked: list[str]  # the ids of the rows asked, in order (the panel's data-labelling before each answer)
    labels: dict[str, int]  # what the page should hold after the undo
    counters: list[str]  # the counter after the 25th label, after the undo
    after_undo: str  # the row shown after the undo
    after_skip: str  # ... after a skip by its button
    after_undo_button: str  # ... after the undo button undid the skip


@pytest.fixture(scope="module")
def session(browser, folder) -> Iterator[Session]:
    """20 rows labelled by keys and 5 by buttons, each by its manual label, then the last undone (key u); a skip by
    its button, undone by the undo button."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    pg = opened(context, folder / "page.html")
    assert pg.text_content("#n-mine") == "0"
    assert pg.locator("#labelling[data-labelling]").count() == 0  # no panel before "Label rows"
    pg.click("#label-start")
    asked, counters = [], []
    for n in range(N):
        asked.append(labelling(pg))
        truth = TRUTH[asked[-1]]
        if n < 20:
            pg.keyboard.press("h" if truth else "c")
        else:
            pg.click("#label-h" if truth else "#label-c")
    counters.append(pg.text_content("#label-counter"))
    pg.keyboard.press("u")
    counters.append(pg.text_content("#label-counter"))
    after_undo = labelling(pg)
    pg.click("#label-s")
    after_skip = labelling(pg)
    pg.click("#label-u")
    labels = {i: TRUTH[i] for i in asked[:-1]}
    yield Session(pg, asked, labels, counters, after_undo, after_skip, labelling(pg))
    context.close()


def words(text: str) -> str:
    return " ".join(text.split())


def test_the_rows_asked_first_are_those_calibrate_suggests(session, folder):
    picked = [r["id"] for r in jsonl(folder / "to_label.jsonl")]
    assert session.asked == picked  # the same rows, in the same order
    # after them, the riskiest of the others (the skip showed it)
    others = [r for r in jsonl(SCORES) if r["id"] not in picked]
    riskiest = max(others, key=lambda r: r["p_hallucination"])  # the first of the ties, as the page breaks them
    assert session.after_skip == riskiest["id"]


def test_keys_and_buttons_label_and_undo_moves_back(session):
    hallucinated = sum(TRUTH[i] for i in session.asked)
    assert 10 <= hallucinated <= 15  # both classes, enough of each for a refit
    assert words(session.counters[0]) == f"25 labelled ({hallucinated} hallucinated); 25 of 25 suggested done"
    last = TRUTH[session.asked[-1]]
    assert words(session.counters[1]) == f"24 labelled ({hallucinated - last} hallucinated); 24 of 25 suggested done"
    assert session.after_undo == session.asked[-1]  # undo moved back to the row it undid
    assert session.after_undo_button == session.asked[-1]  # the skip undone by the button: back on it, unlabelled
    pg = session.page
    assert labelling(pg) == session.asked[-1]
    shown = pg.evaluate("Array.from(bbwdLabels.entries())")
    assert dict(shown) == session.labels and len(shown) == 24
    assert pg.errors == []


def test_the_panel_shows_the_rows_prompt_shaded_answer_and_samples(session):
    pg = session.page
    row = next(r for r in jsonl(SCORES) if r["id"] == session.asked[-1])
    log = next(r for r in jsonl(LOG) if r["id"] == session.asked[-1])
    assert pg.text_content("#labelling .label-id").startswith(row["id"])
    assert pg.text_content("#labelling .prompt") == log["prompt"]
    spans = pg.locator("#labelling .answer .sent")
    assert spans.all_text_contents() == [s["text"] for s in row["sentences"]]
    risks = [float(spans.nth(i).get_attribute("data-risk")) for i in range(spans.count())]
    assert risks == pytest.approx([s["p_hallucination"] for s in row["sentences"]], rel=1e-3)
    assert pg.locator("#labelling .samples li").all_text_contents() == log["responses"]


def test_a_reload_keeps_the_labels_and_the_table_shows_them(session):
    pg = session.page
    pg.reload()
    pg.wait_for_selector("body[data-ready='1']", timeout=30_000)
    hallucinated = sum(session.labels.values())
    assert words(pg.text_content("#label-counter")) == (
        f"24 labelled ({hallucinated} hallucinated); 24 of 25 suggested done"
    )
    mine = pg.evaluate("bbwdTable.getData().filter(r => r.mine === 0 || r.mine === 1).map(r => [r.id, r.mine])")
    assert dict(mine) == session.labels
    pg.evaluate("bbwdTable.setPageSize(50)")  # the 40 rows on one page
    pg.wait_for_function("document.querySelectorAll('#table .tabulator-row').length === 40")
    ids = pg.locator("#table .tabulator-row .tabulator-cell[tabulator-field='id']").all_text_contents()
    cells = pg.locator("#table .tabulator-row .tabulator-cell[tabulator-field='mine']").all_text_contents()
    assert cells == [str(session.labels[i]) if i in session.labels else "" for i in ids]
    assert sum(c != "" for c in cells) == 24
    pg.click("#label-start")
    assert labelling(pg) == session.asked[-1]  # on again at the first row not labelled
    assert pg.errors == []


@pytest.fixture(scope="module")
def downloaded(session, folder) -> Path:
    with session.page.expect_download() as info:
        session.page.click("#label-download")
    assert info.value.suggested_filename == "labels.jsonl"
    path = folder / "labels.jsonl"
    info.value.save_as(path)
    return path


def test_download_saves_one_label_a_line(downloaded, session):
    assert session.page.errors == []  # no request but the page's own
    lines = downloaded.read_text(encoding="utf-8").splitlines()
    order = [r["id"] for r in jsonl(SCORES) if r["id"] in session.labels]  # the scored file's order
    assert [json.loads(line) for line in lines] == [{"id": i, "label": session.labels[i]} for i in order]
    assert len(lines) == 24


def test_calibrate_from_the_downloaded_file(downloaded, session, folder):
    """``calibrate --labels`` fits as ``calibrate`` of the rows with the same labels written in (and no other)."""
    code, err = run_cli("calibrate", str(SCORES), "--labels", str(downloaded), "-o", str(folder / "mine.json"))
    assert code == 0, err
    assert "24 labelled prompts (16 rows without a label skipped, 0 with an error)" in err
    assert "labels: 24 ids of" in err
    by_hand = folder / "by_hand" / "labels_scores.jsonl"
    by_hand.parent.mkdir()
    rows = [{k: v for k, v in r.items() if k != "label"} for r in jsonl(SCORES)]
    rows = [dict(r, label=session.labels[r["id"]]) if r["id"] in session.labels else r for r in rows]
    by_hand.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, err = run_cli("calibrate", str(by_hand), "-o", str(folder / "by_hand.json"))
    assert code == 0, err
    mine, expected = Calibration.load(folder / "mine.json"), Calibration.load(folder / "by_hand.json")
    on = mine.fitted_on
    assert on.n == 24 and on.positives == sum(session.labels.values())
    assert on.refit is not None and on.refit.startswith("map of embedded smollm2-135m.api.json")
    assert on.cv == expected.fitted_on.cv and on.data == expected.fitted_on.data == {"labels_scores.jsonl": 24}
    assert mine.operating_point == expected.operating_point
    ours, theirs = json.loads(mine.to_json()), json.loads(expected.to_json())
    # the source: the scores file and the labels file the user gave (not the joined copy the fit read)
    assert ours["fitted_on"].pop("source") == f"{SCORES} with the labels of {downloaded}"
    theirs["fitted_on"].pop("source")
    assert ours == theirs  # every head, its map and threshold


def test_a_hostile_rows_panel_is_text(browser, tmp_path):
    rows = jsonl(FIXTURES / "report_scores.jsonl")
    hostile = dict(rows[0], id=HOSTILE_ID, line=999, prompt="<script>window.pwned = 3</script>?", flag=True)
    hostile["sentences"] = [dict(rows[0]["sentences"][0], text=HOSTILE, start=0, end=len(HOSTILE))]
    hostile["p_hallucination"] = 0.999
    scores = tmp_path / "scores.jsonl"
    scores.write_text("".join(json.dumps(r) + "\n" for r in [hostile, *rows]), encoding="utf-8")
    code, err = run_cli("report", str(scores), "--suggest", "20", "-o", str(tmp_path / "page.html"))
    assert code == 0, err
    context = browser.new_context()
    pg = opened(context, tmp_path / "page.html")
    pg.click("#label-start")
    assert labelling(pg) == HOSTILE_ID  # every scored row is suggested, in the file's order
    assert pg.text_content("#labelling .answer") == HOSTILE
    assert pg.text_content("#labelling .prompt") == "<script>window.pwned = 3</script>?"
    assert pg.locator("#labelling script, #labelling img, #labelling b").count() == 0
    pg.keyboard.press("h")
    pg.wait_for_timeout(200)  # an onerror would have fired by now
    assert pg.evaluate("typeof window.pwned") == "undefined"
    assert pg.evaluate("Array.from(bbwdLabels.entries())") == [[HOSTILE_ID, 1]]
    assert pg.errors == []
    context.close()
