"""``bbwd report`` on a large log: the page of 100,000 scored rows, its size, and Chromium opening and sorting it.

The rows are synthetic but shaped like ``bbwd batch``'s (a real row of fixtures/report_scores.jsonl is the
template: its settings, usage, timings, members and calibration id), each with a judged answer of 1-4 sentences
(60-240 characters of words), a p_hallucination from a Beta law, the flag at p >= 0.8, a label drawn from p, and
1% error rows. Timed:

    write     bbwd report's write_report: read the rows, sum them, write the page (one run)
    open      Chromium (Debian's, driven by Playwright) from page.goto to the table built and rendered
    sort      a click on the risk column's header until the first row shown is the least risky
    filter    a click on "flagged only" until the counter shows the flagged rows
    search    the last scored row's id typed in the search box until it alone is shown (the filter waits 200 ms)
    open row  a click on that row until its shaded sentences show
    label     a click on "Label rows" until the first suggested row's panel shows, then a key h until the next one's

The page is written with ``--suggest 100`` (its labelling mode: #70), as the newcomer's page is.

Goals (#60, #70): the page at most 60 MB, opened in at most 3 s.

    python -m bench.speed.report                 # 100,000 rows, open and sort 3 times (medians)
    python -m bench.speed.report --rows 5000     # fewer rows
    python -m bench.speed.report --quick         # smoke run: 2,000 rows, one browser run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import ROOT, table, timed

TEMPLATE = ROOT / "fixtures" / "report_scores.jsonl"
TEXT = (
    "the river was founded in 1913 by Smith of Louis whose family lived near Zurich and later moved to Canberra "
    "where he taught music at the college until his death in 1962 after a long illness"
)
WORDS = TEXT.split(" ")


def sentence(rng: np.random.Generator) -> str:
    words = rng.choice(WORDS, size=int(rng.integers(10, 40)))
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def rows(n: int, seed: int = 0) -> list[dict]:
    """n rows shaped like batch's: the fixture's first row with a new id, answer sentences, scores and verdict."""
    rng = np.random.default_rng(seed)
    base = json.loads(TEMPLATE.read_text(encoding="utf-8").splitlines()[0])
    out = []
    for i in range(n):
        p = float(rng.beta(1.2, 2.5))
        row = dict(base, id=f"synthetic.{i}", line=i + 1, input_hash=f"{i:016x}")
        if rng.random() < 0.01:
            row.update(
                p_hallucination=None, flag=None, sentences=None, avg_wd=None, error=f"line {i + 1}: field 'responses'"
            )
        else:
            sents, at = [], 0
            for _ in range(int(rng.integers(1, 5))):
                text = sentence(rng)
                sp = float(np.clip(p + rng.normal(0, 0.15), 0, 1))
                sents.append(
                    {"text": text, "start": at, "end": at + len(text), "score": float(rng.gamma(2, 0.1))}
                    | {"unigram": float(rng.gamma(2, 2)), "p_hallucination": sp, "flag": sp >= 0.8}
                )
                at += len(text) + 1
            row.update(
                p_hallucination=p,
                flag=p >= 0.8,
                sentences=sents,
                avg_wd=float(rng.gamma(2, 0.1)),
                eigen_wd=float(rng.gamma(2, 1e5)),
            )
        row["label"] = int(rng.random() < (row["p_hallucination"] or 0.3))
        out.append(row)
    return out


def browser_times(page_file: Path, repeats: int) -> dict[str, list[float]]:
    """Seconds to open the page (table rendered), sort it by risk, filter the flagged rows, search a row by its id and
    open it, and label a row in its labelling mode, each repeated."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("error: chromium is not installed (apt-get install -y chromium)")
    out: dict[str, list[float]] = {"open": [], "sort": [], "filter": [], "search": [], "row": [], "label": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            t0 = time.perf_counter()
            page.goto(page_file.as_uri(), timeout=120_000)
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            out["open"].append(time.perf_counter() - t0)
            least = page.evaluate("Math.min(...bbwdTable.getData().map(r => r.risk).filter(v => v !== null))")
            t0 = time.perf_counter()
            page.click(".tabulator-col[tabulator-field='risk'] .tabulator-col-title")
            page.wait_for_function(
                "x => Number(document.querySelector(\"#table .tabulator-row .tabulator-cell[tabulator-field='risk']\")"
                ".textContent) === x",
                arg=float(f"{least:.3f}"),
                timeout=60_000,
            )
            out["sort"].append(time.perf_counter() - t0)
            flagged = page.evaluate("bbwdTable.getData().filter(r => r.flag === 1).length")
            t0 = time.perf_counter()
            page.check("#only-flagged")
            page.wait_for_function(
                "x => document.querySelector('#shown').textContent.startsWith(x + ' of')", arg=flagged, timeout=60_000
            )
            out["filter"].append(time.perf_counter() - t0)
            page.uncheck("#only-flagged")
            last = page.evaluate("bbwdTable.getData().filter(r => !r.err).pop().id")  # the last row with an answer
            t0 = time.perf_counter()
            page.fill("#search", last)  # the filter runs 200 ms after the last key (debounced)
            page.wait_for_function("document.querySelector('#shown').textContent.startsWith('1 of')", timeout=60_000)
            out["search"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            page.locator("#table .tabulator-row .tabulator-cell[tabulator-field='id']").first.click()
            page.wait_for_selector("#detail .answer .sent", timeout=60_000)
            out["row"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            page.click("#label-start")
            first = page.get_attribute("#labelling[data-labelling]", "data-labelling", timeout=60_000)
            page.keyboard.press("h")
            page.wait_for_function(
                "x => document.querySelector('#labelling').getAttribute('data-labelling') !== x", arg=first
            )
            out["label"].append(time.perf_counter() - t0)
            if errors:
                raise SystemExit(f"error: the page raised: {errors[0]}")
            page.close()
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3, help="browser runs (medians reported)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2,000 rows, one browser run")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.repeats = 2_000, 1
    from blackbox_wd.doors.report.page import Limits, write_report

    with tempfile.TemporaryDirectory() as tmp:
        scores, page_file = Path(tmp) / "scores.jsonl", Path(tmp) / "report.html"
        scores.write_text("".join(json.dumps(r) + "\n" for r in rows(args.rows)), encoding="utf-8")
        write_ms, written = timed(lambda: write_report(scores, page_file, suggest=min(100, args.rows // 2)))
        times = browser_times(page_file, args.repeats)
        load = os.getloadavg()[0]
        print(
            table(
                [
                    "rows",
                    "scored file MB",
                    "page MB",
                    "write s",
                    "open s",
                    "sort s",
                    "flagged filter s",
                    "search s",
                    "open a row s",
                    "label a row s",
                ],
                [
                    [
                        f"{args.rows:,}",
                        f"{scores.stat().st_size / 1e6:.1f}",
                        f"{written.bytes / 1e6:.1f}",
                        f"{write_ms / 1e3:.2f}",
                        f"{statistics.median(times['open']):.2f}",
                        f"{statistics.median(times['sort']):.2f}",
                        f"{statistics.median(times['filter']):.2f}",
                        f"{statistics.median(times['search']):.2f}",
                        f"{statistics.median(times['row']):.2f}",
                        f"{statistics.median(times['label']):.2f}",
                    ]
                ],
            )
        )
        print(
            f"open runs {[round(t, 2) for t in times['open']]}, sort {[round(t, 2) for t in times['sort']]}; "
            f"{written.flagged:,} flagged, {written.errors:,} errors; texts cut: {written.limits != Limits()}"
        )
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {load:.1f}")


if __name__ == "__main__":
    main()
