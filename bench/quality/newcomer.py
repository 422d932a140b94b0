"""The newcomer's loop (#70), every step through its door: a recorded labelled log, its labels taken out; ``bbwd
batch``; ``bbwd report --suggest N``; in headless Chromium (the system browser), "Label rows" and N rows labelled by
the keys h and c, each by its recorded label; a reload, which must keep them; "Download labels"; ``bbwd calibrate
--labels``; ``bbwd batch --calibration`` (the re-judge). Printed per log, on the rows not labelled: the ECE of p and
the flag's FPR and TPR after the labels, and before them ("0": the first batch's verdict); the rows batch refused
(each with its error, counted apart); the page's console errors, page errors and requests other than the file's.
#70's conditions: ECE at most 0.10, FPR at most 0.20, TPR at least 0.10, no error, the labels kept.

    python -m bench.quality.newcomer ../shared/data/sac3_nq_open.jsonl ../shared/data/kk_*_triviaqa.jsonl \\
        [--skip 500] [--limit 900] [--n 100]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from itertools import islice
from pathlib import Path

from bench.common import ROOT, command, log_line, table
from blackbox_wd.calibration.evaluation.verdicts import labelled_verdicts, risks
from blackbox_wd.doors.report.rows import read_rows

HEADER = ("log", "rows", "refused", "labelled", "ECE", "FPR", "TPR", "ECE 0", "FPR 0", "TPR 0", "errors", "kept", "met")


def bbwd(*args: object) -> None:
    """One ``bbwd`` command in a new process (SystemExit with its stderr when it fails)."""
    done = subprocess.run([sys.executable, "-m", "blackbox_wd", *map(str, args)], cwd=ROOT, capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"bbwd {args[0]} failed:\n{done.stderr.decode()[-3000:]}")


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def label_in_page(page_file: Path, truth: dict[str, int], n: int, labels: Path) -> tuple[list[str], list[str], bool]:
    """Label the first ``n`` rows the page asks by keys, reload, download; the ids labelled, the errors seen and
    whether the reload kept every label."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or sys.exit("error: chromium is not installed (apt-get install -y chromium)")
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        pg = browser.new_context(accept_downloads=True).new_page()
        pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.on("request", lambda r: None if r.url.startswith(("file:", "blob:")) else errors.append(r.url))
        pg.goto(page_file.as_uri())
        pg.wait_for_selector("body[data-ready='1']", timeout=60_000)
        pg.click("#label-start")
        asked = []
        for _ in range(n):
            asked.append(str(pg.get_attribute("#labelling[data-labelling]", "data-labelling")))
            pg.keyboard.press("h" if truth[asked[-1]] else "c")
        pg.reload()
        pg.wait_for_selector("body[data-ready='1']", timeout=60_000)
        kept = pg.text_content("#n-mine") == str(n) and len(pg.evaluate("Array.from(bbwdLabels.keys())")) == n
        with pg.expect_download() as download:
            pg.click("#label-download")
        download.value.save_as(labels)
        browser.close()
    return asked, errors, kept


def loop(data: Path, folder: Path, skip: int, limit: int, n: int) -> list[object]:
    """The loop on ``data``'s records ``skip + 1`` to ``skip + limit``; its row of the table."""
    with data.open(encoding="utf-8") as f:
        records = [json.loads(log_line(line)) for line in islice(f, skip, skip + limit)]
    truth = {str(r["id"]): r.pop("label") for r in records}
    names = ("log.jsonl", "scores.jsonl", "page.html", "labels.jsonl", "judged.jsonl")
    log, scores, page, labels, judged = (folder / name for name in names)
    log.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    bbwd("batch", log, "-o", scores)
    bbwd("report", scores, "--log", log, "--suggest", n, "-o", page)
    asked, errors, kept = label_in_page(page, truth, n, labels)
    assert [r["id"] for r in jsonl(labels)] == [i for i in truth if i in set(asked)], "the download's ids"
    bbwd("calibrate", scores, "--labels", labels, "-o", folder / "mine.json")
    bbwd("batch", scores, "--calibration", folder / "mine.json", "-o", judged)
    rest = [i for i in truth if i not in set(asked)]
    (_, ece_0, fpr_0, tpr_0), (n_rest, ece, fpr, tpr) = (box(path, truth, rest) for path in (scores, judged))
    met = ece <= 0.10 and fpr <= 0.20 and tpr >= 0.10 and not errors and kept
    name = data.stem if skip == 0 else f"{data.stem} {skip + 1}-{skip + len(records)}"
    figures = [f"{v:.3f}" for v in (ece, fpr, tpr, ece_0, fpr_0, tpr_0)]
    return [name, n_rest, len(rest) - n_rest, len(asked), *figures, len(errors), kept, met]


def box(path: Path, truth: dict[str, int], ids: list[str]) -> tuple[int, float, float, float]:
    """``bbwd report``'s labels box over the rows ``ids`` of a scored file given their recorded labels: the rows with
    a verdict (a row batch refused has none, its error naming it), the ECE of p and the flag's FPR and TPR seen."""
    wanted = set(ids)
    labelled = path.with_suffix(".labelled.jsonl")
    with labelled.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps({**r, "label": truth[r["id"]]}) + "\n" for r in jsonl(path) if r["id"] in wanted)
    rows = read_rows(labelled).rows
    lab = labelled_verdicts(rows, risks(rows)[0])
    assert lab is not None and lab.ece is not None and lab.fpr_seen is not None and lab.tpr_seen is not None, path
    return lab.n, lab.ece, lab.fpr_seen, lab.tpr_seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, nargs="+", help="recorded labelled logs, or data files of short answers")
    ap.add_argument("--skip", type=int, default=0, help="records skipped at the start of each file")
    ap.add_argument("--limit", type=int, default=1_000_000, help="records of each file after them")
    ap.add_argument("--n", type=int, default=100, help="rows suggested and labelled")
    args = ap.parse_args()
    print(f"{command()}\n")
    rows = []
    for data in args.data:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(loop(data, Path(tmp), args.skip, args.limit, args.n))
            print(table(HEADER, rows[-1:]), flush=True)
    print("\nOn the rows not labelled; met: ECE <= 0.10, FPR <= 0.20, TPR >= 0.10, no error, labels kept\n")
    print(table(HEADER, rows))


if __name__ == "__main__":
    main()
