"""Parsing JSONL log records for batch scoring: every input line becomes exactly one record.

A line that cannot be scored (blank, not UTF-8, not JSON, a wrong field) becomes a record whose
``error`` names the line and the field; nothing about one line can stop the others. Each record
keeps a hash of its raw bytes, so that a resumed run can check it reads the same input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.measure.sentences import locate
from blackbox_wd.records import Messages
from blackbox_wd.signals.claims import read_claims


@dataclass(frozen=True)
class LogRecord:
    """One input line: the prompt as chat messages, responses already sampled, an optional label, and the
    optional judged answer (``response``: the answer the user was shown, scored by AnswerWD and sentence by
    sentence; ``sentences``: its own sentences)."""

    line: int
    id: str | int
    messages: Messages | None = None
    responses: tuple[str, ...] = ()
    label: int | None = None
    error: str | None = None
    input_hash: str = ""  # first 16 hex digits of the sha256 of the line's raw bytes
    prompt_field: str = "prompt"  # the field the messages came from: 'prompt' or 'messages'
    response: str | None = None
    sentences: tuple[str, ...] | None = None  # the response's own sentences, in order (None: spaCy splits it)
    claims: tuple[str, ...] | None = None  # statements about the response, each scored (``claims``)


class NotJSON(ValueError):
    """NaN, Infinity or -Infinity: Python's json reads them, but they are not JSON."""


def _constant(name: str) -> Any:
    """Refuse a non-JSON constant (json.loads' ``parse_constant``)."""
    raise NotJSON(f"{name} is not JSON")


def strict_loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses NaN, Infinity and -Infinity anywhere (NotJSON), as JSON does."""
    return json.loads(text, parse_constant=_constant)


def line_hash(raw: bytes) -> str:
    """The identity of one input line: sha256 of its bytes without the line ending, 16 hex digits."""
    return hashlib.sha256(raw.rstrip(b"\r\n")).hexdigest()[:16]


def _text(value: Any, field: str, where: str) -> str:
    """A string that is valid Unicode (JSON escapes can encode lone surrogates, which no tokenizer takes)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BBWDError(f"{where}: field {field} is not valid Unicode (a lone surrogate escape)") from None
    return value


def _messages(obj: dict, where: str) -> Messages:
    """The record's prompt as a message list, from 'prompt' or 'messages'."""
    if "messages" in obj:
        msgs = obj["messages"]
        ok = (
            isinstance(msgs, list)
            and msgs
            and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in msgs
            )
        )
        if not ok:
            raise BBWDError(f"{where}: field 'messages' must be a non-empty list of {{role, content}} strings")
        for i, m in enumerate(msgs):
            if not m["content"].strip():
                raise BBWDError(f"{where}: field 'messages'[{i}].content is empty")
        return [
            {
                "role": _text(m["role"], f"'messages'[{i}].role", where),
                "content": _text(m["content"], f"'messages'[{i}].content", where),
            }
            for i, m in enumerate(msgs)
        ]
    if "prompt" not in obj:
        raise BBWDError(f"{where}: missing field 'prompt' (or 'messages')")
    prompt = obj["prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise BBWDError(f"{where}: field 'prompt' must be a non-empty string")
    return [{"role": "user", "content": _text(prompt, "'prompt'", where)}]


def _responses(obj: dict, where: str) -> tuple[str, ...]:
    """The record's pre-sampled responses, each a non-empty string."""
    responses = obj.get("responses", [])
    if not isinstance(responses, list) or not all(isinstance(r, str) for r in responses):
        raise BBWDError(f"{where}: field 'responses' must be a list of strings")
    for i, r in enumerate(responses):
        if not r.strip():
            raise BBWDError(f"{where}: field 'responses'[{i}] is empty")
        _text(r, f"'responses'[{i}]", where)
    return tuple(responses)


def _response(obj: dict, where: str) -> str | None:
    """The record's judged answer, a non-empty string, or None."""
    response = obj.get("response")
    if response is None:
        return None
    if not isinstance(response, str) or not response.strip():
        raise BBWDError(f"{where}: field 'response' must be a non-empty string")
    return _text(response, "'response'", where)


def _sentences(obj: dict, where: str, response: str | None) -> tuple[str, ...] | None:
    """The judged answer's own sentences, non-empty strings found in order in its text, or None."""
    sentences = obj.get("sentences")
    if sentences is None:
        return None
    if not isinstance(sentences, list) or not all(isinstance(x, str) and x.strip() for x in sentences):
        raise BBWDError(f"{where}: field 'sentences' must be a list of non-empty strings")
    if response is None:
        raise BBWDError(f"{where}: field 'sentences' needs the field 'response' they are sentences of")
    try:
        locate(response, sentences)
    except BBWDError as exc:
        raise BBWDError(f"{where}: {exc}") from None
    return tuple(sentences)


def _claims(obj: dict, where: str) -> tuple[str, ...] | None:
    """The record's claims (``claims.read_claims``), or None; BBWDError naming the record and the claim."""
    if obj.get("claims") is None:
        return None
    try:
        return read_claims(obj["claims"])
    except ValueError as exc:
        raise BBWDError(f"{where}: field {exc}") from None


def _label(obj: dict, where: str) -> int | None:
    """The record's label as 0/1, or None."""
    label = obj.get("label")
    if label is None:
        return None
    if isinstance(label, bool) or (isinstance(label, (int, float)) and label in (0, 1)):
        return int(label)
    raise BBWDError(f"{where}: field 'label' must be true/false or 0/1")


def _id(obj: dict, line: int, where: str) -> str | int:
    """The record's id (a string or an integer), else its line number."""
    rid = obj.get("id", line)
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        raise BBWDError(f"{where}: field 'id' must be a string or integer")
    return _text(rid, "'id'", where) if isinstance(rid, str) else rid


def parse_line(text: str, line: int, input_hash: str = "") -> LogRecord:
    """Parse one JSONL line; a bad line gives a record with ``error`` set, never an exception."""
    where = f"line {line}"
    if not text.strip():
        return LogRecord(line, line, error=f"{where}: empty line", input_hash=input_hash)
    try:
        obj = strict_loads(text)
    except json.JSONDecodeError as exc:
        return LogRecord(
            line, line, error=f"{where}: invalid JSON ({exc.msg} at column {exc.colno})", input_hash=input_hash
        )
    except NotJSON as exc:
        return LogRecord(line, line, error=f"{where}: invalid JSON ({exc})", input_hash=input_hash)
    except (ValueError, RecursionError) as exc:  # an integer of over 4300 digits, nesting too deep
        return LogRecord(
            line,
            line,
            error=f"{where}: invalid JSON ({type(exc).__name__}: {one_line(exc, 1000)})",
            input_hash=input_hash,
        )
    if not isinstance(obj, dict):
        return LogRecord(
            line, line, error=f"{where}: expected a JSON object, got {type(obj).__name__}", input_hash=input_hash
        )
    try:
        rid = _id(obj, line, where)
    except BBWDError as exc:
        return LogRecord(line, line, error=str(exc), input_hash=input_hash)
    field = "messages" if "messages" in obj else "prompt"
    try:
        messages, responses, label, response = (
            _messages(obj, where),
            _responses(obj, where),
            _label(obj, where),
            _response(obj, where),
        )
        return LogRecord(
            line,
            rid,
            messages,
            responses,
            label,
            input_hash=input_hash,
            prompt_field=field,
            response=response,
            sentences=_sentences(obj, where, response),
            claims=_claims(obj, where),
        )
    except BBWDError as exc:
        label = obj.get("label")
        keep = int(label) if isinstance(label, bool) or (isinstance(label, (int, float)) and label in (0, 1)) else None
        return LogRecord(line, rid, label=keep, error=str(exc), input_hash=input_hash, prompt_field=field)


def decode_line(raw: bytes, line: int) -> LogRecord:
    """One raw input line (bytes) as a record; bytes that are not UTF-8 make an error record."""
    digest = line_hash(raw)
    if line == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return LogRecord(
            line,
            line,
            error=f"line {line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            input_hash=digest,
        )
    return parse_line(text, line, digest)


def raw_lines(path: Path) -> Iterator[bytes]:
    """The lines of a file as bytes, streamed; the last one may lack its newline."""
    with open(path, "rb") as f:
        yield from f


def line_offsets(path: Path, skip: int = 0) -> Iterator[tuple[int, int]]:
    """(line number, byte offset) of each line of a file after the first ``skip``, streamed."""
    offset = 0
    for line_no, raw in enumerate(raw_lines(path), start=1):
        if line_no > skip:
            yield line_no, offset
        offset += len(raw)


def read_span(path: Path, offset: int, numbers: Sequence[int]) -> list[LogRecord]:
    """The records of lines ``numbers`` (ascending) of a file, the first of them starting at byte ``offset``."""
    want, out = set(numbers), []
    with open(path, "rb") as f:
        f.seek(offset)
        for line_no in range(numbers[0], numbers[-1] + 1):
            raw = f.readline()
            if line_no in want:
                out.append(decode_line(raw, line_no))
    return out


def read_records(path: Path, skip: int = 0) -> Iterator[LogRecord]:
    """Stream one record per line of a JSONL file, after the first ``skip`` lines."""
    for line_no, raw in enumerate(raw_lines(path), start=1):
        if line_no > skip:
            yield decode_line(raw, line_no)
