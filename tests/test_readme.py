"""The README stays short, and the output it shows for its first command has the shape of a real run:
the same lines and labels, whatever the numbers (a changed risk value passes; a missing line does not)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
PROMPT = "What is the capital of Australia?"
COMMAND = f'bbwd score "{PROMPT}"'
ANSI = re.compile(r"\x1b\[[0-9;]*m")
HEX = re.compile(r"\b[0-9a-f]{16}\b")  # a fingerprint
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?")
VERDICT = re.compile(r"\b(?:not flagged|flagged)\b")
RULE = re.compile(r"([━─])\1+")  # a table border's run of one box character, whatever the column widths


def output_block(text: str) -> list[str]:
    """The lines of the first fenced block after the README's first command."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if COMMAND in line)
    fence = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
    return lines[fence + 1 : end]


def shape(lines: list[str]) -> list[str]:
    """Each line with its numbers, fingerprints and verdict replaced by placeholders and its spacing collapsed.

    The responses table keeps one ``<row>`` per response: a response's text (and so how it wraps) is
    the sample's, which the shape leaves free.
    """
    out, in_body = [], False
    for raw in lines:
        line = ANSI.sub("", raw).rstrip()
        if line.startswith("┡"):
            in_body = True
        elif line.startswith("└"):
            in_body = False
        elif in_body:
            cells = line.split("│")
            if len(cells) > 2 and cells[1].strip():
                out.append("<row>")
            continue
        line = VERDICT.sub("<verdict>", NUMBER.sub("<n>", HEX.sub("<hex>", line)))
        out.append(" ".join(RULE.sub(r"\1", line).split()))
    return [line for line in out if line]


def test_readme_is_short():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_two_commands_are_two_and_no_issue_is_cited():
    """The section "Two commands" shows the main command and the tests' (indented lines outside fenced blocks),
    and the README cites no issue by number: a reader has no tracker to look it up in."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    commands, fenced = [], False
    for line in section.splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("    ") and line.strip():
            commands.append(line.strip())
    assert commands == [
        f"pip install torch==2.13.0 -e . && {COMMAND}",
        'pip install torch==2.13.0 -e ".[test]" && python -m pytest -q',
    ]
    assert not re.findall(r"#\d+", text)


def test_shape_ignores_values_not_lines():
    block = output_block(README.read_text(encoding="utf-8"))
    assert len(block) >= 30 and any(line.startswith("AvgWD") for line in block)
    assert sum(line == "<row>" for line in shape(block)) == 10  # K = 10 responses, wrapped or not
    other_values = [re.sub(r"\d", "7", line).replace("not flagged", "flagged") for line in block]
    assert shape(other_values) == shape(block)
    assert shape([line for line in block if not line.startswith("AvgWD")]) != shape(block)
    assert shape([line.replace("EigenWD", "EigenScore") for line in block]) != shape(block)
    assert shape(block + ["risk 0.50 - flagged"]) != shape(block)


@pytest.mark.slow
def test_readme_output_matches_a_real_run():
    env = {**os.environ, "COLUMNS": "80"}  # what a pipe gets; BBWD_CACHE_DIR comes from the environment
    proc = subprocess.run(
        [sys.executable, "-m", "blackbox_wd", "score", PROMPT], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    want = shape(output_block(README.read_text(encoding="utf-8")))
    got = shape(proc.stdout.splitlines())
    assert got == want, "README's first output block no longer has the shape of `" + COMMAND + "`:\n" + proc.stdout
