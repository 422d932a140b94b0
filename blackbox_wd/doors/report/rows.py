"""Scored rows read for the report: each line of ``batch``'s output (or ``eval``'s ``results.jsonl``, or a re-judged
file) becomes a :class:`ReportRow` holding only what the page shows; a line that is not a scored row is named.

A batch row holds the scores, the verdict and the judged answer's sentences, but not the prompt nor the samples:
those come from the log it was scored from (``--log``), joined by line number and checked by the line's hash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blackbox_wd.calibration.members import member_value
from blackbox_wd.checks import is_finite_number
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.run.inputs import LogRecord, read_records
from blackbox_wd.signals.baselines import ANSWER_PEERS, PEERS


@dataclass
class Mark:
    """A scored span of the answer (a sentence) or a claim: its text or offsets, its p, score and flag."""

    start: int
    end: int
    p: float | None
    score: float | None
    flag: bool | None
    text: str = ""  # a claim's text (a sentence is read from the answer by its offsets)


@dataclass
class ReportRow:
    """What the page shows of one scored row."""

    line: int  # its line in the scored file
    id: str
    p: float | None  # p_hallucination
    flag: bool | None
    error: str | None
    label: int | None
    answer: str | None  # the judged answer (the row's, the log's, or its sentences put back at their offsets)
    prompt: str | None = None
    samples: list[str] = field(default_factory=list)
    sentences: list[Mark] = field(default_factory=list)
    claims: list[Mark] = field(default_factory=list)
    members: dict[str, float | None] = field(default_factory=dict)  # the verdict's members and their values
    peers: dict[str, float] = field(default_factory=dict)  # lm-polygraph's estimators (``baselines.PEERS``...) it has
    avg_wd: float | None = None
    calibration: str | None = None  # the id of the calibration that judged it
    settings: dict[str, Any] | None = None  # the run's reported settings (eval's rows: its settings.json)
    fingerprint: str | None = None
    n_samples: int = 0
    target_tokens: int = 0


@dataclass
class ReadRows:
    """The rows of a scored file, and the lines that were not scored rows (each named: line number and why)."""

    rows: list[ReportRow]
    skipped: list[str]


def _number(value: Any) -> float | None:
    return float(value) if is_finite_number(value) else None


def _count(value: Any) -> int:
    return int(value) if is_finite_number(value) and float(value) >= 0 else 0


def _text(value: Any) -> str | None:
    """A prompt as text: a string, or chat messages as 'role: content' lines."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        if len(value) == 1 and value[0].get("role") == "user" and isinstance(value[0].get("content"), str):
            return value[0]["content"]
        return "\n".join(f"{m.get('role', '?')}: {m.get('content', '')}" for m in value)
    return None


def _marks(items: Any) -> list[Mark]:
    """A row's ``sentences`` (offsets) or ``claims`` (texts) as marks; entries that are not objects are left out."""
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        start, end = item.get("start"), item.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
            start = end = 0
        flag = item.get("flag")
        out.append(
            Mark(
                start,
                end,
                _number(item.get("p_hallucination")),
                _number(item.get("score")),
                flag if isinstance(flag, bool) else None,
                str(item.get("text") or ""),
            )
        )
    return out


def answer_from_sentences(sentences: Any) -> str | None:
    """The judged answer put back from its sentences' texts at their offsets (the space between them as blanks).

    Parameters
    ----------
    sentences : Any
        A row's ``sentences``: objects with ``text`` and ``start``, in order.

    Returns
    -------
    str or None
        None when there are none, or they are not such objects in order.

    Examples
    --------
    >>> answer_from_sentences([{"text": "Sydney.", "start": 0}, {"text": "It is.", "start": 8}])
    'Sydney. It is.'
    """
    if not isinstance(sentences, list) or not sentences:
        return None
    chars: list[str] = []
    for s in sentences:
        if not isinstance(s, dict) or not isinstance(s.get("text"), str) or not isinstance(s.get("start"), int):
            return None
        start, text = s["start"], s["text"]
        if start < len(chars):
            return None
        chars.extend(" " * (start - len(chars)))
        chars.extend(text)
    return "".join(chars)


def _members(row: dict[str, Any]) -> dict[str, float | None]:
    names = row.get("members")
    if not isinstance(names, list):
        return {}
    return {str(name): member_value(row, str(name)) for name in names}


def _peers(row: dict[str, Any]) -> dict[str, float]:
    baselines = row.get("baselines")
    if not isinstance(baselines, dict):
        return {}
    return {name: float(baselines[name]) for name in (*PEERS, *ANSWER_PEERS) if is_finite_number(baselines.get(name))}


def report_row(obj: Any, line: int) -> ReportRow:
    """One scored row as the page shows it; ValueError saying why when the object is not a scored row.

    Parameters
    ----------
    obj : Any
        The line's JSON value.
    line : int
        Its line number in the scored file.

    Returns
    -------
    ReportRow
    """
    if not isinstance(obj, dict):
        raise ValueError(f"not a scored row (a JSON {type(obj).__name__}, not an object)")
    if "avg_wd" not in obj and "error" not in obj:
        raise ValueError("not a scored row (no avg_wd and no error field: is it a log line?)")
    flag, label, error = obj.get("flag"), obj.get("label"), obj.get("error")
    answer = obj.get("answer") if isinstance(obj.get("answer"), str) else obj.get("response")
    calibration = obj.get("calibration")
    if isinstance(calibration, dict):  # score --json's summary
        calibration = calibration.get("id")
    return ReportRow(
        line=line,
        id=str(obj.get("id", line)),
        p=_number(obj.get("p_hallucination")),
        flag=flag if isinstance(flag, bool) else None,
        error=None if error is None else str(error),
        label=label if label in (0, 1) and not isinstance(label, bool) else None,
        answer=answer if isinstance(answer, str) else answer_from_sentences(obj.get("sentences")),
        prompt=_text(obj.get("prompt")) or _text(obj.get("question")),
        samples=[s for s in obj.get("responses") or [] if isinstance(s, str)],
        sentences=_marks(obj.get("sentences")),
        claims=_marks(obj.get("claims")),
        members=_members(obj),
        peers=_peers(obj),
        avg_wd=_number(obj.get("avg_wd")),
        calibration=calibration if isinstance(calibration, str) else None,
        settings=obj.get("settings") if isinstance(obj.get("settings"), dict) else None,
        fingerprint=obj.get("fingerprint") if isinstance(obj.get("fingerprint"), str) else None,
        n_samples=_count(obj.get("n_samples")),
        target_tokens=_count(obj.get("target_tokens")),
    )


def scored_lines(path: Path) -> Iterator[tuple[int, Any | ValueError]]:
    """Each line's number and its JSON value, or the ValueError saying why it is not JSON (blank lines included).

    Parameters
    ----------
    path : Path

    Returns
    -------
    iterator of (int, Any or ValueError)
    """
    with path.open("rb") as f:
        for n, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
                if not text.strip():
                    raise ValueError("blank line")
                yield n, json.loads(text)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
                yield n, ValueError(f"not JSON ({one_line(exc, 120)})")
            except ValueError as exc:
                yield n, exc


def read_rows(path: Path, log: Path | None = None, warn: Callable[[str], None] | None = None) -> ReadRows:
    """The scored rows of a file, with their prompts and samples from the log they were scored from.

    Parameters
    ----------
    path : Path
        ``batch``'s output, ``eval``'s ``results.jsonl`` or a re-judged file.
    log : Path, optional
        The log ``batch`` read: each row's ``line`` is joined to that line, when its hash is the row's
        ``input_hash`` (a row whose line differs keeps no prompt, and is named).
    warn : callable, optional
        Called with the one line naming each line that is not a scored row, as it is read.

    Returns
    -------
    ReadRows

    Raises
    ------
    BBWDError
        The file (or the log) is missing, or holds no scored row.
    """
    if not path.is_file():
        raise BBWDError(f"scored rows not found: {path}")
    rows, skipped = [], []
    joins: dict[int, tuple[int, str]] = {}  # a row's index -> its log line and the hash the row says it had
    for n, value in scored_lines(path):
        try:
            if isinstance(value, ValueError):
                raise value
            row = report_row(value, n)
        except ValueError as exc:
            skipped.append(f"{path} line {n}: {exc}")
            if warn is not None:
                warn(skipped[-1])
            continue
        rows.append(row)
        if log is not None and isinstance(value.get("line"), int):
            joins[len(rows) - 1] = (value["line"], str(value.get("input_hash") or ""))
    if not rows:
        raise BBWDError(f"{path} holds no scored rows (bbwd batch or bbwd eval output)")
    _settings_beside(path, rows)
    if log is not None:
        skipped += _join_log(rows, joins, log, warn)
    return ReadRows(rows, skipped)


def _settings_beside(path: Path, rows: list[ReportRow]) -> None:
    """Give the rows without settings (``bbwd eval``'s) those of the ``settings.json`` beside them, where its
    fingerprint is theirs."""
    beside = path.parent / "settings.json"
    if all(r.settings is not None for r in rows) or not beside.is_file():
        return
    try:
        settings = json.loads(beside.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return
    if not isinstance(settings, dict) or not settings.get("fingerprint"):
        return
    for row in rows:
        if row.settings is None and row.fingerprint == settings["fingerprint"]:
            row.settings = settings


def _join_log(
    rows: list[ReportRow], joins: dict[int, tuple[int, str]], log: Path, warn: Callable[[str], None] | None
) -> list[str]:
    """Give each row its log line's prompt, samples and judged answer; the rows whose line differs, named."""
    if not log.is_file():
        raise BBWDError(f"--log not found: {log}")
    wanted: dict[int, list[tuple[int, str]]] = {}
    for i, (line, digest) in joins.items():
        wanted.setdefault(line, []).append((i, digest))
    notes = []
    for rec in _records(log, max(wanted, default=0)):
        for i, digest in wanted.get(rec.line, []):
            if digest and digest != rec.input_hash:
                notes.append(
                    f"{log} line {rec.line}: not the line row {rows[i].id!r} was scored from (its hash differs)"
                )
                if warn is not None:
                    warn(notes[-1])
                continue
            row = rows[i]
            if rec.messages is not None:
                row.prompt = _text(list(rec.messages))
            row.samples = list(rec.responses)
            if rec.response is not None:
                row.answer = rec.response
    return notes


def _records(log: Path, last: int) -> Iterator[LogRecord]:
    for rec in read_records(log):
        if rec.line > last:
            return
        yield rec
