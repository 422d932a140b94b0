"""Property: whatever mix of valid and invalid lines `bbwd batch` reads, every input line gets exactly
one output line, in input order, and every valid line is scored."""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_vocab import WORDS

from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.doors.batch import BatchRunner
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.forcing import HFTeacher

text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)


@st.composite
def valid_line(draw) -> bytes:
    """A line that must be scored: prompt or messages, two responses, optional id and label."""
    obj: dict = {}
    if draw(st.booleans()):
        obj["id"] = draw(st.one_of(st.integers(-(10**30), 10**30), st.text(max_size=8)))
    if draw(st.booleans()):
        obj["prompt"] = draw(text)
    else:
        obj["messages"] = [{"role": "user", "content": draw(text)}]
    obj["responses"] = [draw(text), draw(text)]
    if draw(st.booleans()):
        obj["label"] = draw(st.sampled_from([0, 1, True, False]))
    escaped = draw(st.sampled_from(["", "\u0001", "\u001f", "\t", "\u00e9", "\u2603"]))
    obj["responses"][0] += escaped  # escaped control or non-ASCII characters are fine
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode()


BASE = '{"prompt": "what is it", "responses": ["paris", "rome"]'
INVALID = st.one_of(
    st.just(b""),
    st.just(b"   "),
    st.just(b"\t"),  # empty lines
    st.text(alphabet="{}[],:\"x ", min_size=1, max_size=12)
    .map(str.encode)
    .filter(lambda b: not _parses(b)),  # bad JSON
    st.sampled_from(
        [
            b"[1, 2]",
            b"42",
            b"null",
            b'"a string"',  # not an object
            b'{"prompt": 42}',
            b'{"prompt": ["a"]}',
            b'{"messages": "hi"}',
            b'{"messages": [{"role": 1}]}',
            b'{"prompt": "x", "responses": "paris"}',
            b'{"prompt": "x", "responses": [1, 2]}',
            b'{"prompt": "x", "responses": ["a", ""]}',
            b'{"id": [1], "prompt": "x"}',
            b'{"id": true, "prompt": "x"}',
            b'{"responses": ["a", "b"]}',
        ]
    ),  # wrong types and fields
    st.sampled_from(
        [
            BASE + ', "label": NaN}',
            '{"id": NaN, "prompt": "x", "responses": ["a", "b"]}',
            BASE + ', "label": Infinity}',
            BASE + ', "label": 2}',
        ]
    ).map(str.encode),  # NaN and friends
    st.sampled_from(
        ['{"id": 1' + "0" * 5000 + ', "prompt": "x"}', '{"id": 1e400, "prompt": "x"}', BASE + ', "label": 1e999}']
    ).map(str.encode),  # huge numbers
    st.sampled_from(["\x00", "\x01", "\x1b", "\x7f\x08"]).map(
        lambda c: ('{"prompt": "a' + c + 'b", "responses": ["x", "y"]}').encode()
    ),  # raw control characters
    st.binary(min_size=1, max_size=6)
    .filter(lambda b: b"\n" not in b and not _utf8(b))
    .map(lambda b: b'{"prompt": "' + b + b'", "responses": ["x", "y"]}'),  # invalid UTF-8
    st.just(b'{"prompt": "\\ud800", "responses": ["a", "b"]}'),  # a lone surrogate escape
    st.just(b"[" * 100_000),  # nesting deeper than the parser's recursion limit
)


def _parses(raw: bytes) -> bool:
    try:
        json.loads(raw)
        return True
    except ValueError:
        return False


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    lines=st.lists(
        st.one_of(valid_line().map(lambda b: (b, True)), INVALID.map(lambda b: (b, False))), min_size=1, max_size=10
    ),
    trailing_newline=st.booleans(),
    group_size=st.integers(1, 4),
)
def test_one_output_line_per_input_line(tiny_llama, lines, trailing_newline, group_size):
    if lines[-1][0] == b"":
        trailing_newline = True  # else the file ends at the newline before it: that empty line does not exist
    teacher = HFTeacher(*tiny_llama, name="tiny")
    detector = Detector(teacher, LocalSampler(teacher), Settings(k=2, device="cpu"))
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_bytes(b"\n".join(raw for raw, _ in lines) + (b"\n" if trailing_newline else b""))
        summary = asyncio.run(BatchRunner(replace(detector, group_size=group_size), sample_missing=False).run(src, dst))
        rows = [json.loads(line) for line in dst.read_text().splitlines()]
    assert [r["line"] for r in rows] == list(range(1, len(lines) + 1))
    for row, (raw, valid) in zip(rows, lines, strict=True):
        if valid:
            assert row["error"] is None and row["n_samples"] == 2 and row["avg_wd"] >= 0, (raw, row)
        else:
            assert row["error"].startswith(f"line {row['line']}: ") and row["avg_wd"] is None, (raw, row)
            assert "\n" not in row["error"] and not row["transient"]
    assert summary.records == len(lines) and summary.errors == sum(not v for _, v in lines)
