"""Take docs/img/labelling.png: the labelling panel of ``bbwd report --suggest 25`` on fixtures/labels_scores.jsonl,
in the system Chromium (headless, driven by Playwright), after twelve rows labelled by their manual labels.

    python -m scripts.labelling_screenshot
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from blackbox_wd.doors.report.page import write_report

ROOT = Path(__file__).resolve().parents[1]
SCORES = ROOT / "fixtures" / "labels_scores.jsonl"
LOG = ROOT / "fixtures" / "labels_log.jsonl"
OUT = ROOT / "docs" / "img" / "labelling.png"


def main() -> None:
    from playwright.sync_api import sync_playwright

    truth = {r["id"]: r["label"] for r in map(json.loads, LOG.read_text(encoding="utf-8").splitlines())}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        page_file = Path(tmp) / "page.html"
        write_report(SCORES, page_file, LOG, suggest=25)
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(page_file.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.click("#label-start")
        for _ in range(12):
            row = page.get_attribute("#labelling", "data-labelling")
            page.keyboard.press("h" if truth[row] else "c")
        top = page.locator("#label-bar").bounding_box()
        bottom = page.locator("#labelling").bounding_box()
        assert top is not None and bottom is not None
        clip = {"x": 0, "y": top["y"] - 8, "width": 1200, "height": bottom["y"] + bottom["height"] + 8 - top["y"]}
        OUT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUT), clip=clip, full_page=True)
        browser.close()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
