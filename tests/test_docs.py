"""The docs' examples run: every ``>>>`` example in docs/*.md and README.md passes under doctest, every
``bbwd <command>`` they name exists, and every module is named where it lives."""

from __future__ import annotations

import ast
import doctest
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^\s*(```|~~~).*$", re.MULTILINE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"\bbbwd ([a-z][a-z-]*)\b")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def examples(page: Path) -> doctest.DocTest:
    """The page's ``>>>`` examples as one doctest; fence lines become blank so that a closing fence ends the
    expected output of the example before it (line numbers are kept)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return doctest.DocTestParser().get_doctest(text, {}, page.name, str(page), 0)


def code_text(page: Path) -> str:
    """What a reader would type: fenced and indented code blocks, and inline code spans."""
    out, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            out.append(line)
        else:
            out.extend(CODE_SPAN.findall(line))
    return "\n".join(out)


def test_pages_are_found():
    names = {p.name for p in PAGES}
    assert {
        "README.md",
        "index.md",
        "method.md",
        "score.md",
        "batch.md",
        "eval.md",
        "serve.md",
        "ray.md",
        "python.md",
        "settings.md",
        "calibration.md",
        "speed.md",
        "results-archive.md",
    } <= names


def test_docs_have_examples():
    counts = {page.name: len(examples(page).examples) for page in PAGES}
    assert sum(counts.values()) >= 20, counts
    assert all(counts[name] > 0 for name in ("README.md", "method.md", "settings.md", "calibration.md", "python.md")), (
        counts
    )


@pytest.mark.parametrize("page", [p for p in PAGES if examples(p).examples], ids=lambda p: p.name)
def test_examples_run(page):
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    result = runner.run(examples(page), out=report.append)
    assert result.failed == 0, "".join(report)
    assert result.attempted > 0


def test_a_wrong_example_fails():
    """The runner above is not a rubber stamp: a wrong expected value is a failure."""
    test = doctest.DocTestParser().get_doctest(">>> 1 + 1\n3\n", {}, "wrong", "wrong.md", 0)
    result = doctest.DocTestRunner(optionflags=FLAGS).run(test, out=lambda _: None)
    assert result.failed == 1


def named_commands() -> set[str]:
    return {m.group(1) for page in PAGES for m in COMMAND.finditer(code_text(page))}


def test_named_commands_exist():
    from blackbox_wd.doors.cli import app

    named = named_commands()
    assert {"score", "batch", "eval", "serve", "calibrate"} <= named
    runner = CliRunner()
    for command in sorted(named):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0, f"`bbwd {command}` is named in the docs but fails: {result.output}"
        assert "Usage:" in result.output
    assert runner.invoke(app, ["no-such-command", "--help"]).exit_code != 0


def test_layout_names_every_module():
    """Every module is named where it lives (it went stale once): docs/layout.md names the package's own modules and
    folders, each folder's ``__init__`` docstring its modules and subfolders."""
    layout = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    package = ROOT / "blackbox_wd"
    missing = [
        path.name
        for path in sorted(package.glob("*.py"))
        if path.name not in ("__init__.py", "__main__.py") and f"`{path.name}`" not in layout
    ]
    missing += [
        f"{d.name}/" for d in sorted(package.iterdir()) if (d / "__init__.py").exists() and f"`{d.name}/`" not in layout
    ]
    for init in sorted(package.rglob("__init__.py")):
        if init.parent == package:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        kids = [p.stem for p in init.parent.glob("*.py") if p.name != "__init__.py"]
        kids += [d.name for d in init.parent.iterdir() if (d / "__init__.py").exists() or d.name == "shipped"]
        missing += [
            f"{init.parent.relative_to(package)}/{kid}" for kid in sorted(kids) if not re.search(rf"\b{kid}\b", doc)
        ]
    assert missing == []


def test_readme_links_resolve():
    """README.md is outside the mkdocs build, so its relative links (to docs/ pages and their anchors) are checked
    here; the site's own links are checked by `mkdocs build --strict` in .ci/run."""
    readme = ROOT / "README.md"
    links = re.findall(r"\]\(([^)\s#]+)(?:#([^)\s]+))?\)", readme.read_text(encoding="utf-8"))
    assert len(links) >= 10
    for target, anchor in links:
        if "://" in target:
            continue
        page = (readme.parent / target).resolve()
        assert page.is_file(), target
        if anchor:
            headings = [
                line.lstrip("#").strip()
                for line in page.read_text(encoding="utf-8").splitlines()
                if line.startswith("#")
            ]
            slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
            assert anchor in slugs, f"{target}#{anchor}"
