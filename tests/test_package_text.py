"""The installed package stands alone: no file of blackbox_wd/ names a folder beside the repository (``shared/``),
its code cites no issue by number (a reader of the package has no tracker to look one up in), and its metadata
keeps a user's own torch (a lower bound, no pin). Beside it, bench/ stays at most 3,500 lines."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

PACKAGE = Path(__file__).resolve().parents[1] / "blackbox_wd"
SHARED = re.compile(r"\bshared/")  # a path into shared/ (``../shared/data``), not the word "shared"
ISSUE = re.compile(r"(?<![\w&])#\d{2,}(?!\w)")  # "#47", not a colour ("#1f77b4") nor an entity ("&#39;")


def text_files() -> list[Path]:
    """Every file of the package that reads as UTF-8 text (caches left out)."""
    out = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            try:
                path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            out.append(path)
    return out


def test_no_file_of_the_package_names_a_shared_folder() -> None:
    named = [str(p.relative_to(PACKAGE)) for p in text_files() if SHARED.search(p.read_text(encoding="utf-8"))]
    assert named == []


def test_the_packages_code_cites_no_issue_by_number() -> None:
    cited = {
        str(p.relative_to(PACKAGE)): ISSUE.findall(p.read_text(encoding="utf-8"))
        for p in text_files()
        if p.suffix == ".py"
    }
    assert {k: v for k, v in cited.items() if v} == {}


def test_the_patterns_find_what_they_look_for() -> None:
    assert SHARED.search("bbwd eval --data ../shared/data/nq.jsonl") and not SHARED.search("a shared pass")
    assert ISSUE.findall("the claim head (#47)") == ["#47"] and not ISSUE.findall("color: #1f77b4; &#39;")


def test_torch_has_a_lower_bound_and_no_pin() -> None:
    """A user with a CUDA build of torch keeps it: the package asks for a lower bound; the README and CI pin what
    they install."""
    deps = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    torch = [d for d in deps if re.match(r"torch\b", d)]
    assert len(torch) == 1 and ">=" in torch[0] and "==" not in torch[0], torch


MAX_BENCH_LINES = 3_500


def test_bench_stays_short() -> None:
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE.parent / "bench").rglob("*.py"))
    assert lines <= MAX_BENCH_LINES, lines
