"""Labelled rows read for a fit: results files (``bbwd eval``'s ``results.jsonl`` or batch rows) by sample count,
each row's label (``label``, else a passage's share of inaccurate sentences) and prompt, the sentence and claim
tables, the members short answers alone have, and the settings the rows were scored with.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blackbox_wd.calibration.combine import Table, table_from
from blackbox_wd.calibration.evaluation.labels import NONFACT
from blackbox_wd.calibration.members import (
    CLAIM_MEMBERS,
    FEATURES,
    MEMBERS,
    SENTENCE_MEMBERS,
    SHORT_ONLY,
    answer_kind,
    is_passage,
    member_value,
)
from blackbox_wd.checks import is_finite_number
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import PASSAGE_LABELS
from blackbox_wd.settings import COVERED, LATER_FIELDS, fingerprint

MAIN_SHARE = 0.9  # the main K: the largest with at least this share of the labelled prompts of the K with the most


@dataclass
class LabelledRows:
    """The labelled rows of results files: the answer table, the sentence table, and what was read."""

    answers: Table
    sentences: Table | None
    data: dict[str, int]  # prompts per ``source``
    fingerprint: str | None  # the main K's rows' settings fingerprint (None when they carry none)
    skipped_errors: int = 0
    skipped_unlabelled: int = 0
    rounds: dict[int, Table] = field(default_factory=dict)  # the rows of every other sample count, by its k
    short_only: tuple[str, ...] = ()  # of SHORT_ONLY: left missing on the passages, when some rows are passages
    # each answer's sentences, by its prompt: of the main K (key None) and of each other k
    answer_sentences: dict[int | None, dict[str, list[Any]]] = field(default_factory=dict)
    k: int | None = None  # the main K: the largest sample count of nearly the most labelled prompts
    fingerprints: dict[int, str | None] = field(default_factory=dict)  # each sample count's rows' fingerprint
    claims: Table | None = None  # the main K's labelled claims (``claim_table``), one row each
    settings: dict[str, Any] | None = None  # the reported settings the main K's rows carry (batch rows), if any
    teacherless: int = 0  # rows that skipped the teacher pass (batch without --all-scores): their W2 members null


def json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) of each non-blank line of a JSONL file, streamed; BBWDError naming a line that is not a JSON
    object, or the file when it is missing."""
    if not path.is_file():
        raise BBWDError(f"input file not found: {path}")
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise BBWDError(f"{path} line {n}: not JSON") from None
            if not isinstance(row, dict):
                raise BBWDError(f"{path} line {n}: expected a JSON object")
            yield n, row


def file_rows(paths: Sequence[Path]) -> list[tuple[str, int, dict[str, Any]]]:
    """(file, line, row) of every JSON object of the files (``json_objects``)."""
    return [(str(path), n, row) for path in paths for n, row in json_objects(path)]


def row_label(row: dict[str, Any], label: str, where: str) -> float | None:
    """The row's label: ``label`` (0 or 1), else its first passage label (``PASSAGE_LABELS``: ``human_score``,
    ``unsupported_share``; in [0, 1]), else None."""
    if row.get(label) is not None:
        if row[label] not in (0, 1):  # True/False compare equal to 1/0
            raise BBWDError(f"{where}: field '{label}' must be 0 or 1 (got {row[label]!r})")
        return float(row[label])
    key = next((key for key in PASSAGE_LABELS if row.get(key) is not None), None)
    if key is None:
        return None
    h = row[key]
    if not is_finite_number(h) or not 0 <= h <= 1:
        raise BBWDError(f"{where}: field '{key}' must be a number in [0, 1] (got {h!r})")
    return float(h)


def row_k(row: dict[str, Any], where: str) -> int:
    """The sample count a row was scored on: its ``n_samples``, else the length of its ``token_counts``; 0 when it
    says neither (its run's K, which the settings give)."""
    k = row.get("n_samples", len(row.get("token_counts") or []))
    if not isinstance(k, int) or isinstance(k, bool) or (k < 2 and "n_samples" in row):
        raise BBWDError(f"{where}: field 'n_samples' must be an integer >= 2 (got {k!r})")
    return k


def read_labelled(paths: Sequence[Path], label: str = "label") -> LabelledRows:
    """The labelled rows of results files, by sample count (one run per K: ``bbwd eval -k 3``, ``-k 5``, ...); rows
    with an ``error`` or no label are skipped and counted, a K whose rows mix settings fingerprints refused, a row
    without AvgWD or EigenWD > 0 refused by its line, unless it skipped the teacher pass (counted: ``teacherless``).

    The main K is the largest sample count of nearly the most labelled prompts (``MAIN_SHARE``: a record with fewer
    samples than a K is an error at that K alone, so a large K may lose a few): its rows are ``answers``, each
    other K's are ``rounds[k]``. A prompt is its row's ``source`` and ``id``, so that its rows at each K are one
    group (every fold keeps them on one side).
    """
    by_k: dict[int, list[tuple[str, int, dict[str, Any], float]]] = {}
    errors = unlabelled = teacherless = 0
    for path, n, row in file_rows(paths):
        where = f"{path} line {n}"
        if row.get("error") is not None:
            errors += 1
            continue
        y = row_label(row, label, where)
        if y is None:
            unlabelled += 1
            continue
        # its verdict read the texts alone (``run.texts``): every W2 field null, not one missing
        skipped = all(name in row and row[name] is None for name in ("avg_wd", "eigen_wd"))
        teacherless += skipped
        for name in () if skipped else FEATURES:
            if member_value(row, name) is None:
                raise BBWDError(
                    f"{where}: field '{name.removeprefix('log_')}' must be a finite number (> 0 for eigen_wd)"
                )
        by_k.setdefault(row_k(row, where), []).append((path, n, row, y))
    if not by_k:
        raise BBWDError(
            f"{', '.join(map(str, paths))}: no row with scores and field '{label}' or "
            f"{' or '.join(map(repr, PASSAGE_LABELS))} ({unlabelled} without, {errors} with an error): choose the "
            "label with --label"
        )
    most = max(map(len, by_k.values()))
    main = max(k for k, rows in by_k.items() if len(rows) >= MAIN_SHARE * most)
    fingerprints: dict[int, str | None] = {}
    tables: dict[int, Table] = {}
    sentences_of: dict[int | None, dict[str, list[Any]]] = {}
    short_only: tuple[str, ...] = ()
    answers = sentences = claims = None
    carried: dict[str, Any] | None = None
    data: dict[str, int] = {}
    for k in [main, *sorted(set(by_k) - {main})]:
        rows = by_k[k]
        fps = dict.fromkeys(row.get("fingerprint") for _, _, row, _ in rows)
        if len(fps) > 1:
            first = {fp: f"{path} line {n}" for path, n, row, _ in reversed(rows) for fp in [row.get("fingerprint")]}
            seen = ", ".join(f"{fp} (first at {first[fp]})" for fp in fps)
            raise BBWDError(
                f"the rows of {f'K = {k}' if k else 'one K'} mix settings (fingerprints {seen}): calibrate rows of "
                "one settings fingerprint (a run at each K)"
            )
        fingerprints[k] = next(iter(fps))
        if k == main:
            carried = next((row["settings"] for _, _, row, _ in rows if isinstance(row.get("settings"), dict)), None)
        members: dict[str, list[float | None]] = {m: [member_value(row, m) for _, _, row, _ in rows] for m in MEMBERS}
        groups = [prompt_of(path, n, row) for path, n, row, _ in rows]
        source = [str(row.get("source", Path(path).name)) for path, _, row, _ in rows]
        passages = [is_passage(row) for _, _, row, _ in rows]
        kinds = [answer_kind(row) for _, _, row, _ in rows]
        if k == main:
            short_only = short_only_members(members, passages)
            data = dict(Counter(source))
            sentences = sentence_table(rows, groups)
            claims = claim_table(rows, groups, source)
        leave_out(members, short_only, passages)
        tables[k] = table_from(members, [y for *_, y in rows], groups, source, kinds)
        sentences_of[None if k == main else k] = {
            g: list(row.get("sentences") or []) for g, (_, _, row, _) in zip(groups, rows, strict=True)
        }
    answers = tables.pop(main)
    return LabelledRows(
        answers,
        sentences,
        data,
        fingerprints[main],
        errors,
        unlabelled,
        dict(sorted(tables.items())),
        short_only,
        sentences_of,
        main or None,
        {k: fp for k, fp in fingerprints.items() if k},
        claims,
        carried,
        teacherless,
    )


def prompt_of(path: str, line: int, row: dict[str, Any]) -> str:
    """A row's prompt, the same in every run of its data: its ``source`` (else its file) and ``id`` (else its
    line)."""
    return f"{row.get('source', path)}:{row.get('id', line)}"


def sentence_table(rows: Sequence[tuple[str, int, dict[str, Any], float]], groups: Sequence[str]) -> Table | None:
    """The labelled sentences of the rows (``sentences`` with ``sentence_labels``; label: minor or major
    inaccurate), one row each, grouped by their answer's prompt; None when none is labelled."""
    sentence: dict[str, list[Any]] = {"score": [], "unigram": [], "y": [], "group": []}
    for (_, _, row, _), group in zip(rows, groups, strict=True):
        for s, tag in zip(row.get("sentences") or [], row.get("sentence_labels") or [], strict=False):
            sentence["score"].append(member_value(s, "score"))
            sentence["unigram"].append(member_value(s, "unigram"))
            sentence["y"].append(float(tag in NONFACT))
            sentence["group"].append(group)
    if not sentence["y"]:
        return None
    return table_from(
        {m: sentence[m] for m in SENTENCE_MEMBERS}, sentence["y"], sentence["group"], ["sentence"] * len(sentence["y"])
    )


def claim_table(
    rows: Sequence[tuple[str, int, dict[str, Any], float]], groups: Sequence[str], sources: Sequence[str]
) -> Table | None:
    """The labelled claims of the rows (``claims``, scored, with as many ``claim_labels``; label: unsupported,
    ``other`` left out), one row each with its answer's AvgWD (``CLAIM_MEMBERS``), grouped by their answer's prompt
    and kept with their row's ``source``, so that the claim head's threshold is chosen leave-one-set-out as the
    answer heads' is; None when none is labelled."""
    claim: dict[str, list[Any]] = {"avg_wd": [], "score": [], "y": [], "group": [], "source": []}
    for (_, _, row, _), group, source in zip(rows, groups, sources, strict=True):
        for c, tag in zip(row.get("claims") or [], row.get("claim_labels") or [], strict=False):
            if tag not in ("supported", "unsupported"):
                continue
            claim["avg_wd"].append(member_value(row, "avg_wd"))
            claim["score"].append(member_value(c, "score"))
            claim["y"].append(float(tag == "unsupported"))
            claim["group"].append(group)
            claim["source"].append(source)
    if not claim["y"]:
        return None
    return table_from({m: claim[m] for m in CLAIM_MEMBERS}, claim["y"], claim["group"], claim["source"])


def short_only_members(members: Mapping[str, Sequence[float | None]], passages: Sequence[bool]) -> tuple[str, ...]:
    """The SHORT_ONLY members to leave missing on the passages: those every short answer has, when the rows hold
    both kinds (rows of one kind keep every member)."""
    if all(passages) or not any(passages):
        return ()
    return tuple(
        m for m in SHORT_ONLY if all(v is not None for v, p in zip(members[m], passages, strict=True) if not p)
    )


def leave_out(members: dict[str, list[float | None]], names: Sequence[str], passages: Sequence[bool]) -> None:
    """Set the members ``names`` to None on the passages, in place."""
    for name in names:
        members[name] = [None if p else v for v, p in zip(members[name], passages, strict=True)]


def read_settings(
    results: Path,
    settings_from: Path | None,
    rows_fingerprint: str | None,
    k: int | None = None,
    carried: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The reported settings of the results: ``settings_from``, else ``settings.json`` beside them (``bbwd eval``'s),
    else those the rows carry (``carried``: ``bbwd batch``'s rows, ``score --json``), with ``k`` as the sample count
    when given (the runs of a calibration differ only in it).

    Raise BBWDError when there is none, when it lacks a covered field, or when the rows carry a
    fingerprint that is not that of these settings.
    """
    path = settings_from or results.parent / "settings.json"
    if settings_from is None and not path.is_file() and carried is not None:
        settings, path = dict(carried), results
    elif not path.is_file():
        raise BBWDError(
            f"no settings for {results}: {path} not found and its rows carry none (bbwd batch's rows and bbwd "
            "score --json carry theirs, bbwd eval writes settings.json beside results.jsonl; otherwise pass "
            "--settings-from FILE)"
        )
    else:
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise BBWDError(f"{path} is not JSON") from None
    if not isinstance(settings, dict):
        raise BBWDError(f"{path}: expected a JSON object of settings")
    missing = [name for name in COVERED if name not in settings and name not in LATER_FIELDS]
    if missing:
        raise BBWDError(f"{path} lacks the setting(s) {', '.join(missing)}")
    if k is not None:
        settings["k"] = k
    if rows_fingerprint is not None and fingerprint(settings) != rows_fingerprint:
        raise BBWDError(
            f"{path} does not describe {results}: its settings have fingerprint {fingerprint(settings)}, "
            f"the rows {rows_fingerprint}"
        )
    return settings
