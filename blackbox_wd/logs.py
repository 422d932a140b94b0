"""Parsing JSONL log records for batch scoring: every problem becomes a one-line error for its line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Messages


@dataclass(frozen=True)
class LogRecord:
    """One input line: the prompt as chat messages, responses already sampled, an optional label."""

    line: int
    id: str | int
    messages: Messages | None = None
    responses: tuple[str, ...] = ()
    label: int | None = None
    error: str | None = None


def _messages(obj: dict, where: str) -> Messages:
    """The record's prompt as a message list, from 'prompt' or 'messages'."""
    if "messages" in obj:
        msgs = obj["messages"]
        ok = isinstance(msgs, list) and msgs and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in msgs)
        if not ok:
            raise BBWDError(f"{where}: field 'messages' must be a non-empty list of {{role, content}} strings")
        return [{"role": m["role"], "content": m["content"]} for m in msgs]
    if "prompt" not in obj:
        raise BBWDError(f"{where}: missing field 'prompt' (or 'messages')")
    prompt = obj["prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise BBWDError(f"{where}: field 'prompt' must be a non-empty string")
    return [{"role": "user", "content": prompt}]


def _responses(obj: dict, where: str) -> tuple[str, ...]:
    """The record's pre-sampled responses, each a non-empty string."""
    responses = obj.get("responses", [])
    if not isinstance(responses, list) or not all(isinstance(r, str) for r in responses):
        raise BBWDError(f"{where}: field 'responses' must be a list of strings")
    for i, r in enumerate(responses):
        if not r.strip():
            raise BBWDError(f"{where}: field 'responses'[{i}] is empty")
    return tuple(responses)


def _label(obj: dict, where: str) -> int | None:
    """The record's label as 0/1, or None."""
    label = obj.get("label")
    if label is None:
        return None
    if isinstance(label, bool) or label in (0, 1):
        return int(label)
    raise BBWDError(f"{where}: field 'label' must be true/false or 0/1")


def parse_line(text: str, line: int) -> LogRecord:
    """Parse one JSONL line; a bad line gives a record with ``error`` set, never an exception."""
    where = f"line {line}"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return LogRecord(line, line, error=f"{where}: invalid JSON ({exc.msg} at column {exc.colno})")
    if not isinstance(obj, dict):
        return LogRecord(line, line, error=f"{where}: expected a JSON object, got {type(obj).__name__}")
    rid = obj.get("id", line)
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        return LogRecord(line, line, error=f"{where}: field 'id' must be a string or integer")
    try:
        return LogRecord(line, rid, _messages(obj, where), _responses(obj, where), _label(obj, where))
    except BBWDError as exc:
        return LogRecord(line, rid, label=obj.get("label") if obj.get("label") in (0, 1) else None, error=str(exc))


def read_records(path: Path, skip: int = 0) -> Iterator[LogRecord]:
    """Stream the records of a JSONL file (blank lines are skipped), after the first ``skip``."""
    with open(path, encoding="utf-8") as f:
        n = 0
        for line_no, text in enumerate(f, start=1):
            if not text.strip():
                continue
            n += 1
            if n > skip:
                yield parse_line(text, line_no)
