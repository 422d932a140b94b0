"""``bbwd report``'s page in a real browser: the system Chromium (Debian's ``chromium``) driven by Playwright.

The page of the recorded fixture (fixtures/report_scores.jsonl with its log) plus one hostile row opens with no
console error, shows its rows sorted by risk, sorts, filters the flagged rows and by text, opens a row with its
sentences shaded, and shows a hostile answer's ``<script>`` as text without running it. These tests never skip:
without Chromium they fail, saying how to install it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.cli_support import jsonl, run_cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SCORES = FIXTURES / "report_scores.jsonl"
LOG = FIXTURES / "report_log.jsonl"
HOSTILE = "<script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'> is the answer."
HOSTILE_ID = "<b>hostile</b>"
CLAIM = "<img src=x onerror='window.pwned = 4'>Bob was born in Paris."


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> Path:
    """The fixture's scored rows and one hostile row (its answer, prompt and id markup), made into a page."""
    rows = jsonl(SCORES)
    hostile = dict(rows[0], id=HOSTILE_ID, line=999, prompt="<script>window.pwned = 3</script>?", flag=True)
    hostile["sentences"] = [dict(rows[0]["sentences"][0], text=HOSTILE, start=0, end=len(HOSTILE))]
    hostile["p_hallucination"] = 0.999
    hostile["claims"] = [{"text": CLAIM, "score": 0.5, "p_hallucination": 0.7, "flag": True}]
    # a row whose sentences have scores and no p (a calibration without a sentence head): shaded by rank
    unjudged = dict(rows[1], id="unjudged", line=998, flag=False, p_hallucination=0.01)
    unjudged["sentences"] = [
        {"text": text, "start": 4 * i, "end": 4 * i + 3, "score": score, "p_hallucination": None, "flag": None}
        for i, (text, score) in enumerate([("One", 9.0), ("Two", 1.0), ("Six", 5.0)])
    ]
    folder = tmp_path_factory.mktemp("report")
    scores = folder / "scores.jsonl"
    scores.write_text("".join(json.dumps(r) + "\n" for r in [*rows, hostile, unjudged]), encoding="utf-8")
    out = folder / "page.html"
    code, err = run_cli("report", str(scores), "-o", str(out), "--log", str(LOG))
    assert code == 0, err
    return out


@pytest.fixture
def page(browser, page_file) -> Iterator[Any]:
    """The page opened (its table built), with the console's errors and the page's exceptions collected."""
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(page_file.as_uri())
    pg.wait_for_selector("body[data-ready='1']", timeout=30_000)
    pg.errors = errors
    yield pg
    pg.close()


def shown_ids(pg) -> list[str]:
    return pg.locator("#table .tabulator-row .tabulator-cell[tabulator-field='id']").all_text_contents()


def shown_risks(pg) -> list[float | None]:
    cells = pg.locator("#table .tabulator-row .tabulator-cell[tabulator-field='risk']").all_text_contents()
    return [None if c.strip() == "–" else float(c) for c in cells]


def open_row(pg, row_id: str) -> None:
    """Search for a row by its id and open it (a click on its id cell)."""
    pg.fill("#search", row_id)
    pg.wait_for_function("document.querySelectorAll('#table .tabulator-row').length === 1")
    cell = pg.locator("#table .tabulator-row .tabulator-cell[tabulator-field='id']").first
    # on a loaded machine Tabulator can redraw the row between the press and the release, and that click is lost:
    # click again (a user would), three times at most, and then fail as the page would for a user
    for _ in range(3):
        cell.click()
        try:
            pg.wait_for_selector("#detail h2", timeout=5_000)
            return
        except PlaywrightTimeout:
            continue
    pg.wait_for_selector("#detail h2", timeout=1_000)


def test_opens_with_every_row_and_no_console_error(page):
    assert page.errors == []
    assert page.text_content("#n-rows") == "22"
    assert page.text_content("#n-errors") == "1"
    assert page.text_content("#shown") == "22 of 22 rows"
    assert page.evaluate("bbwdTable.getDataCount()") == 22
    rows = page.locator("#table .tabulator-row").count()
    assert rows == 22  # one page of 25
    assert "0.675" in page.text_content("#threshold")  # the shipped API file's first head


def test_the_labels_box_shows_ece_and_lm_polygraphs_estimators_beside(page):
    """The page shows the summary's ECE and each peer's AUROC on the labelled rows, as ``page_summary`` gives them."""
    from blackbox_wd.doors.report.page import page_summary
    from blackbox_wd.doors.report.rows import read_rows

    scores = Path(page.url.removeprefix("file://")).with_name("scores.jsonl")
    lab = page_summary(read_rows(scores).rows, []).labelled
    assert lab is not None and lab.ece is not None
    assert page.text_content("#ece") == f"{lab.ece:.3f}"
    assert page.text_content("#beside") == "lm-polygraph, same rowsAUROC"
    for b in lab.beside:
        cells = page.locator(f"#labels tr[data-key='{b.key}'] td").all_text_contents()
        assert cells == [b.name, f"{b.auroc:.3f}"]
    assert len(lab.beside) == 8


def test_rows_are_sorted_by_risk_and_sort_again(page):
    risks = shown_risks(page)
    known = [r for r in risks if r is not None]
    assert known == sorted(known, reverse=True) and len(known) == 21
    assert risks[-1] is None  # the error row at the bottom
    assert shown_ids(page)[0] == "<b>hostile</b>"  # p 0.999, shown as text
    page.click(".tabulator-col[tabulator-field='risk'] .tabulator-col-title")
    again = [r for r in shown_risks(page) if r is not None]
    assert again == sorted(known) and again != known
    assert page.errors == []


def test_the_flagged_filter(page):
    flagged = {r["id"] for r in jsonl(SCORES) if r["flag"]} | {HOSTILE_ID}
    page.check("#only-flagged")
    page.wait_for_function(f"document.querySelectorAll('#table .tabulator-row').length === {len(flagged)}")
    assert set(shown_ids(page)) == flagged
    assert page.text_content("#shown") == f"{len(flagged)} of 22 rows"
    verdicts = page.locator("#table .tabulator-row .tabulator-cell[tabulator-field='flag']").all_text_contents()
    assert verdicts == ["flagged"] * len(flagged)
    page.uncheck("#only-flagged")
    page.check("#only-errors")
    page.wait_for_function("document.querySelectorAll('#table .tabulator-row').length === 1")
    assert shown_ids(page) == [jsonl(SCORES)[-1]["id"]]


def test_an_opened_row_shows_its_shaded_sentences(page):
    row = next(r for r in jsonl(SCORES) if r["id"] == "wikibio_gpt3.0")
    open_row(page, "wikibio_gpt3.0")
    spans = page.locator("#detail .answer .sent")
    assert spans.all_text_contents() == [s["text"] for s in row["sentences"]]
    shades = [spans.nth(i).evaluate("e => getComputedStyle(e).backgroundColor") for i in range(spans.count())]
    assert all(s.startswith("rgba(") and not s.endswith(", 0)") for s in shades)
    risks = [float(spans.nth(i).get_attribute("data-risk")) for i in range(spans.count())]
    assert risks == pytest.approx([s["p_hallucination"] for s in row["sentences"]], rel=1e-3)
    # the riskiest sentence is the reddest (smallest hue): shades differ with the risk
    assert len(set(shades)) > 1
    log = next(r for r in jsonl(LOG) if r["id"] == "wikibio_gpt3.0")
    assert page.text_content("#detail .prompt") == log["prompt"]
    samples = page.locator("#detail .samples li").all_text_contents()
    assert len(samples) == len(log["responses"]) == 10
    for shown, sample in zip(samples, log["responses"], strict=True):  # each cut to 800 characters
        assert (
            shown == sample
            if len(sample) <= 800
            else shown == f"{sample[:800]} [... {len(sample) - 800} more characters]"
        )
    members = page.locator("#detail .members td:first-child").all_text_contents()
    assert members == row["members"]
    assert page.errors == []


def test_a_hostile_answer_is_text_and_never_runs(page):
    open_row(page, "hostile")
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.text_content("#detail .answer") == HOSTILE
    assert page.text_content("#detail .prompt") == "<script>window.pwned = 3</script>?"
    assert page.text_content("#detail h2").startswith(HOSTILE_ID)
    assert page.locator("#detail .claims td").all_text_contents() == [CLAIM, "p 0.700"]
    assert page.locator("#detail script, #detail img, #table img, #detail b").count() == 0
    page.wait_for_timeout(200)  # an onerror would have fired by now
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.errors == []


def test_the_search_box_finds_a_row_by_its_answer(page):
    log = jsonl(LOG)
    words = log[3]["response"].split()[:4]
    page.fill("#search", " ".join(words).upper())
    page.wait_for_function("document.querySelector('#shown').textContent.startsWith('1 of')")
    assert shown_ids(page) == [log[3]["id"]]


def test_sentences_without_a_p_are_shaded_by_their_score_rank(page):
    open_row(page, "unjudged")
    spans = page.locator("#detail .answer .sent")
    assert spans.all_text_contents() == ["One", "Two", "Six"]
    assert [spans.nth(i).get_attribute("data-risk") for i in range(3)] == ["1", "0", "0.5"]
    assert page.text_content("#detail .answer") == "One Two Six"  # the answer put back from its sentences
    assert page.errors == []


def test_rows_are_paged(page):
    page.select_option(".tabulator-page-size", "25")
    assert page.locator("#table .tabulator-row").count() == 22  # 22 rows: one page of 25
    page.evaluate("bbwdTable.setPageSize(10)")
    ids, risks = [], []
    for step, count in ((None, 10), ("next", 10), ("last", 2)):
        if step:
            page.click(f".tabulator-page[data-page='{step}']")
        page.wait_for_function(f"document.querySelectorAll('#table .tabulator-row').length === {count}")
        ids += shown_ids(page)
        risks += shown_risks(page)
    assert len(set(ids)) == 22  # every row once
    known = [r for r in risks if r is not None]
    assert known == sorted(known, reverse=True) and risks[-1] is None  # in risk order across the pages
    assert page.errors == []
