"""Fitting a calibration on labelled results: the combined verdict's heads and the sentence head.

Input: one or more results files (``bbwd eval``'s ``results.jsonl``, all scored under one settings
fingerprint) and the reported settings they were scored with (``settings.json`` beside the first, which
``bbwd eval`` writes, or any file named with ``--settings-from``). A row's label is its ``label`` field (0/1,
1 = hallucination; another field with ``--label``), else its ``human_score`` (in [0, 1]: the share of
inaccurate sentences), which enters as a weighted pair of rows (``combine.table_from``). A row with
``sentences`` and ``sentence_labels`` also gives one row per sentence to the sentence head (label: minor or
major inaccurate). With a sentence head, each answer also gets the member ``sentence_verdict`` from its
sentences (labelled or not) under that head (``model.sentence_verdict``), before the answer heads are fitted.

The members are those every labelled row has (``model.MEMBERS``: a member some rows lack, say DSE on
passages, is left out, since the verdict could not tell its absence from its value); the heads are those
members less each combination of the members a result may lack (the judged answer's, LNE, EigenWD's fixed
bandwidth), down to [AvgWD, ln EigenWD]. When the rows hold both short answers and passages (``model.is_passage``),
the members defined for short answers only (``model.SHORT_ONLY``) are missing on the passages, one more group a
result may lack, and the calibration reads them as missing on a passage it judges. Each head is fitted by
``combine.fit_head`` (``combine.COMBINER`` over the standardised members, the calibrator of lower nested out-of-fold
log-loss, the threshold at the target out-of-fold FPR), every fold grouped by prompt; the sentence head likewise
with ``SENTENCE_COMBINER``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import brier_score_loss, roc_auc_score

from blackbox_wd import __version__
from blackbox_wd.adaptive import Settle
from blackbox_wd.calibration.combine import (
    CrossValidation,
    HeadFit,
    Table,
    first_by_prompt,
    fit_head,
    head_sets,
    heads_on,
    kinds_to_fit,
    table_from,
)
from blackbox_wd.calibration.model import (
    ANSWER_LOGPROB_MEMBERS,
    ANSWER_MEMBERS,
    CLAIM_MEMBERS,
    COVERED,
    FEATURES,
    MEMBERS,
    SENTENCE_MEMBERS,
    SHORT_ONLY,
    TEACHER_FREE,
    Calibration,
    FittedOn,
    Head,
    Stage,
    answer_kind,
    calibration_fingerprint,
    covered_settings,
    is_passage,
    member_value,
    sentence_verdict,
)
from blackbox_wd.calibration.settle import fit_settles
from blackbox_wd.checks import is_finite_number
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import PASSAGE_LABELS
from blackbox_wd.settings import LATER_FIELDS, fingerprint
from blackbox_wd.signals.baselines.peers import ANSWER_PEERS, PEERS

ECE_BINS = 10
MAIN_SHARE = 0.9  # the main K: the largest with at least this share of the labelled prompts of the K with the most
# the sentence head's combiner, chosen on WikiBio by grouped cross-validation (bench/RESULTS.md, "The combined
# verdict": the mean of its NonFact and Factual AUC-PR); the answer heads' is ``combine.COMBINER``
SENTENCE_COMBINER = "mean"
CV = CrossValidation()  # the calibration's: combine.COMBINER, 5 folds, seed 0, target FPR 0.1
# the claim head's: rule 2 of bench/RESULTS.md, "Claim scores (#47)", the standardised mean of CLAIM_MEMBERS
CLAIM_COMBINER = "mean"
# members a result may lack, each group at once; the heads that keep the most come first (``head_sets``), so a
# result with a judged answer but no teacher log-probs is judged by a head with the answer's other members
OPTIONAL = (ANSWER_LOGPROB_MEMBERS, ANSWER_MEMBERS, ("lne",), ("log_eigen_wd_fixed",))
NONFACT = ("minor_inaccurate", "major_inaccurate")


@dataclass(frozen=True)
class Design:
    """Which members the heads read: those of short answers (the ``phrase`` and ``sentence`` kinds) and those of the
    others (passages, and the heads over every kind), and which heads there are (``heads``): ``"kinds"``, heads of
    each kind of answer fitted on its rows, then the heads over every kind; ``"pooled"``, the same but one head per
    member set over the phrase and sentence answers together (each short kind holds a copy), Platt, so that every short
    answer of a run is ranked by one score; ``"short"``, those pooled heads and the heads over every kind (no
    passage heads); ``"one"``, the heads over every kind alone. After the heads over these, each
    is fitted again over its members in ``TEACHER_FREE`` alone: the heads that judge a run of a teacher with no
    calibration of its own (``Calibration.teacher_free``); a run of the calibration's own teacher never reaches them."""

    short: tuple[str, ...]
    other: tuple[str, ...]
    heads: str = "kinds"


# #58: short answers read the five peers (``baselines.peers``), the answer's three and its disagreement; the others
# every member but the peers. Chosen by model left out (bench/RESULTS.md, "Ahead of the peers")
DESIGN = Design(
    (*PEERS, *ANSWER_PEERS, "answer_disagreement"),
    tuple(m for m in MEMBERS if m not in PEERS and m not in ANSWER_PEERS),
)
SHORT_KINDS = ("phrase", "sentence")
POOLED = "short"  # the kind of the rows a pooled head is fitted on: both SHORT_KINDS


@dataclass
class Labelled:
    """The labelled rows of results files: the answer table, the sentence table, and what was read."""

    answers: Table
    sentences: Table | None
    data: dict[str, int]  # prompts per ``source``
    fingerprint: str | None  # the main K's rows' settings fingerprint (None when they carry none)
    skipped_errors: int = 0
    skipped_unlabelled: int = 0
    stages: dict[int, Table] = field(default_factory=dict)  # the rows of every other sample count, by its k
    short_only: tuple[str, ...] = ()  # of SHORT_ONLY: left missing on the passages, when some rows are passages
    # each answer's sentences, by its prompt: of the main K (key None) and of each other k
    answer_sentences: dict[int | None, dict[str, list[Any]]] = field(default_factory=dict)
    k: int | None = None  # the main K: the largest sample count of nearly the most labelled prompts
    fingerprints: dict[int, str | None] = field(default_factory=dict)  # each sample count's rows' fingerprint
    claims: Table | None = None  # the main K's labelled claims (``claim_table``), one row each
    settings: dict[str, Any] | None = None  # the reported settings the main K's rows carry (batch rows), if any


@dataclass
class CalibrationFit:
    """A fitted calibration with the cross-validated fits its report is made from."""

    calibration: Calibration
    labelled: Labelled
    heads: list[HeadFit]  # one per head, in the calibration's order
    sentence: HeadFit | None
    claim: HeadFit | None = None


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


def read_rows(paths: Sequence[Path]) -> list[tuple[str, int, dict[str, Any]]]:
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


def read_labelled(paths: Sequence[Path], label: str = "label") -> Labelled:
    """The labelled rows of results files, by sample count (one run per K: ``bbwd eval -k 3``, ``-k 5``, ...); rows
    with an ``error`` or no label are skipped and counted, a K whose rows mix settings fingerprints refused, a row
    without AvgWD or EigenWD > 0 refused by its line.

    The main K is the largest sample count of nearly the most labelled prompts (``MAIN_SHARE``: a record with fewer
    samples than a K is an error at that K alone, so a large K may lose a few): its rows are ``answers``, each
    other K's are ``stages[k]``. A prompt is its row's ``source`` and ``id``, so that its rows at each K are one
    group (every fold keeps them on one side).
    """
    by_k: dict[int, list[tuple[str, int, dict[str, Any], float]]] = {}
    errors = unlabelled = 0
    for path, n, row in read_rows(paths):
        where = f"{path} line {n}"
        if row.get("error") is not None:
            errors += 1
            continue
        y = row_label(row, label, where)
        if y is None:
            unlabelled += 1
            continue
        for name in FEATURES:
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
    return Labelled(
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


def expected_calibration_error(
    y: np.ndarray, p: np.ndarray, bins: int = ECE_BINS, w: np.ndarray | None = None
) -> float:
    """ECE = sum over bins b of |sum_b w y - sum_b w p| / sum w, over ``bins`` equal-width bins of p: [0, 1/bins],
    (1/bins, 2/bins], ..., those of ``sklearn.calibration.calibration_curve(strategy="uniform")``."""
    y = np.asarray(y, dtype=float)
    p = np.asarray(p, dtype=float)
    w = np.ones_like(p) if w is None else np.asarray(w, dtype=float)
    which = np.searchsorted(np.linspace(0.0, 1.0, bins + 1)[1:-1], p)
    gap = np.bincount(which, weights=w * y, minlength=bins) - np.bincount(which, weights=w * p, minlength=bins)
    return float(np.abs(gap).sum() / w.sum())


def fit_calibration(
    labelled: Labelled,
    settings: Mapping[str, Any],
    *,
    source: str = "",
    label: str = "label",
    samples: str | None = None,
    cv: CrossValidation = CV,
    sentence_combiner: str = SENTENCE_COMBINER,
    design: Design = DESIGN,
) -> CalibrationFit:
    """Fit the heads and the sentence head, cross-validated by prompt (the module's docstring).

    Parameters
    ----------
    labelled : Labelled
        The rows, from :func:`read_labelled`.
    settings : mapping of str to Any
        The reported settings the rows were scored with (every name of ``COVERED``); the calibration is
        valid for these (seed excluded).
    source : str, default=""
        The labelled results files, as stored in ``fitted_on.source``.
    label : str, default="label"
        The 0/1 label's field name, as stored.
    samples : str or None, default=None
        Who drew the rows' samples; default: the settings' ``samples_from`` (``bbwd batch --samples-from``). Rows of
        recorded samples with neither are fitted as of an origin not stated, and the calibration's note says so.
    cv : CrossValidation, default=CV
        The answer heads' combiner (``combine.COMBINER`` by default, chosen leave-one-set-out on the recorded dev
        sets: bench/RESULTS.md, "The verdict on a data set it never saw"), its folds (each class needs rows in
        at least ``2 * folds`` prompts), their seed and the target false-positive rate of each threshold.
    sentence_combiner : {"logistic", "mean", "select"}, default=SENTENCE_COMBINER
        The sentence head's combiner (its folds are ``cv``'s).
    design : Design, default=DESIGN
        Which members the heads of short answers and of the others read.

    Returns
    -------
    fit : CalibrationFit
        ``fit.calibration`` (the :class:`Calibration` to save) and the fits its report is drawn from.

    Raises
    ------
    BBWDError
        Too few prompts of a class for ``cv.folds``, or a bad ``cv.folds`` or ``cv.target_fpr``.
    """
    samples = samples or settings.get("samples_from")  # recorded rows without either: origin not stated
    if not isinstance(cv.folds, int) or cv.folds < 2:
        raise BBWDError(f"folds must be an integer >= 2 (got {cv.folds})")
    sentence = None
    if labelled.sentences is not None:
        sentence = fit_head(labelled.sentences, SENTENCE_MEMBERS, replace(cv, combiner=sentence_combiner))
    claim = None
    if labelled.claims is not None:
        claim = fit_head(labelled.claims, CLAIM_MEMBERS, replace(cv, combiner=CLAIM_COMBINER))
    if sentence is not None:  # the fit's report reads the member from the tables
        labelled = replace(
            labelled,
            answers=with_sentence_verdict(labelled.answers, sentence.head, labelled.answer_sentences.get(None, {})),
            stages={
                k: with_sentence_verdict(t, sentence.head, labelled.answer_sentences.get(k, {}))
                for k, t in labelled.stages.items()
            },
        )
    t = labelled.answers
    short_only = fittable(t, labelled.short_only, cv.folds)
    members = [m for m in MEMBERS if t.rows([m]).all() or m in short_only]
    optional = (*OPTIONAL, short_only) if short_only else OPTIONAL
    sets = member_sets([m for m in members if m in design.other], optional)
    # a short answer's heads over the design's members, when the rows have any (else over the others', as before it)
    has_short = [m for m in members if m in design.short]
    short = member_sets(has_short, optional) if has_short else sets
    heads = fit_heads(t, sets, cv, short, design.heads)
    first = heads[0]
    applied = used_heads([h.head for h in heads])
    y, w = t.y[first.rows], t.w[first.rows]
    fitted_on = FittedOn(
        source=source,
        data=labelled.data,
        protocol=settings.get("protocol"),
        label=label,
        n=len(set(t.groups.tolist())),
        positives=int(round(float(np.sum(t.w * t.y)))),
        base_rate=float(np.sum(t.w * t.y) / np.sum(t.w)),
        folds=cv.folds,
        seed=cv.seed,
        cv={
            "auroc": float(roc_auc_score(y, first.z, sample_weight=w)),
            "log_loss": first.log_loss[first.head.model.method],
            "brier": float(brier_score_loss(y, first.p, sample_weight=w)),
            "ece": expected_calibration_error(y, first.p, w=w),
        },
        samples=samples or None,
        sentence_base_rate=None if sentence is None else float(np.mean(labelled.sentences.y)),  # type: ignore[union-attr]
        sentence_n=None if sentence is None else int(labelled.sentences.y.size),  # type: ignore[union-attr]
        claim_base_rate=None if claim is None else float(np.mean(labelled.claims.y)),  # type: ignore[union-attr]
        claim_n=None if claim is None else int(labelled.claims.y.size),  # type: ignore[union-attr]
    )
    stages = fit_stages(labelled, (sets, short), heads, cv, design.heads)
    calibration = Calibration(
        model=applied[0].model,
        operating_point=applied[0].operating_point,
        fingerprint=calibration_fingerprint(settings),
        settings=covered_settings(settings),
        fitted_on=fitted_on,
        bbwd_version=__version__,
        more_heads=tuple(applied[1:]),
        sentence=None if sentence is None else sentence.head,
        claim=None if claim is None else claim.head,
        stages=stages,
        short_only=short_only,
    )
    return CalibrationFit(calibration, labelled, heads, sentence, claim)


def member_sets(members: Sequence[str], optional: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    """The heads' member sets, most members first: ``members`` less each combination of the ``optional`` groups
    (``combine.head_sets``), then [AvgWD, ln EigenWD] (the head every result of the calibration's teacher has), then
    each set's members in ``TEACHER_FREE`` alone (``Design``)."""
    sets = head_sets(members, optional)
    if FEATURES not in sets:
        sets.append(FEATURES)
    free = [f for s in sets if (f := tuple(m for m in s if m in TEACHER_FREE))]
    return list(dict.fromkeys([*sets, *free]))


def fit_heads(
    t: Table,
    sets: Sequence[Sequence[str]],
    cv: CrossValidation,
    short: Sequence[Sequence[str]] | None = None,
    heads: str = "kinds",
) -> list[HeadFit]:
    """The heads over every row (``sets``, most members first), then those of each kind of answer with rows enough
    (``combine.kinds_to_fit``; a short answer's over ``short``, when given), each set less the members its kind's rows
    lack, fitted on that kind's rows alone; a
    kind's head whose rows a head over every row already holds alone (a short-answer member's) is that head, not
    fitted twice but kept in the kind's order (so a kind's later head with fewer members never judges first).
    ``heads`` (``Design.heads``): "pooled", the short kinds' heads are fitted once on the phrase and sentence rows
    together, with a Platt calibrator, and each short kind holds a copy of them (and the passages get heads of their
    own); "short", those and no other kind's; "one", no heads of a kind."""
    general = [fit_head(t, head, cv) for head in sets]
    fitted = {(h.head.members, h.rows.tobytes()): h for h in general}
    kinds = kinds_to_fit(t, cv.folds) if heads in ("kinds", "pooled") else []
    pool = []
    if heads in ("pooled", "short"):
        t = replace(t, kind=np.where(np.isin(t.kind, SHORT_KINDS), POOLED, t.kind))
        kinds = [kind for kind in kinds if kind not in SHORT_KINDS]
        if all(np.unique(t.groups[(t.kind == POOLED) & (t.y == c)]).size >= 2 * cv.folds for c in (0, 1)):
            pool = [fit_head(t, head, cv, ("platt",), POOLED) for head in heads_on(t, short or sets, POOLED)]
    return (
        general
        + [replace(h, head=replace(h.head, kind=kind)) for kind in SHORT_KINDS for h in pool]
        + [
            replace(same, head=replace(same.head, kind=kind))
            if (same := fitted.get((head, (t.rows(head) & (t.kind == kind)).tobytes()))) is not None
            else fit_head(t, head, cv, kind=kind)
            for kind in kinds
            for head in heads_on(t, short if short is not None and kind in SHORT_KINDS else sets, kind)
        ]
    )


def with_sentence_verdict(t: Table, head: Head, sentences: Mapping[str, Any]) -> Table:
    """The table with the member ``sentence_verdict`` of each row's answer, from its sentences under the sentence
    ``head`` (NaN where it has none)."""
    by_prompt = {g: sentence_verdict(head, x) for g, x in sentences.items()}
    column = np.array([np.nan if (v := by_prompt.get(g)) is None else v for g in t.groups])
    return replace(t, members={**t.members, "sentence_verdict": column})


def fittable(t: Table, short_only: Sequence[str], folds: int) -> tuple[str, ...]:
    """The members of ``short_only`` (missing on the passages of ``t``) whose rows hold each class in at least
    ``2 * folds`` prompts, as a head over them needs; the others are left out of every head."""
    return tuple(
        m for m in short_only if all(np.unique(t.groups[t.rows([m]) & (t.y == c)]).size >= 2 * folds for c in (0, 1))
    )


def verdicts_by_prompt(t: Table, fits: Sequence[HeadFit]) -> dict[str, tuple[float, bool]]:
    """Each prompt's nested out-of-fold p and flag from the first head that has its members, as it is judged."""
    return first_by_prompt(
        (t.groups[hf.rows], [(float(p), bool(p >= hf.head.operating_point.threshold)) for p in hf.p]) for hf in fits
    )


def fit_stages(
    labelled: Labelled,
    sets: tuple[Sequence[Sequence[str]], Sequence[Sequence[str]]],
    final_fits: Sequence[HeadFit],
    cv: CrossValidation,
    heads: str = "kinds",
) -> tuple[Stage, ...]:
    """The heads of every other sample count (the same member sets, ``(other, short)`` as in ``fit_heads``, less the
    members no row of it has; fitted on its rows) and, for each below the main K, its ``-k auto`` band
    (``settle.fit_settles`` over each prompt's nested out-of-fold p and flag from the head that judges it, at every
    stage below K and at K, on the prompts scored at all of them); above K, no band."""
    if not labelled.stages:
        return ()
    other, short = sets
    fits = {k: fit_heads(t, heads_on(t, other), cv, heads_on(t, short), heads) for k, t in labelled.stages.items()}
    below = [k for k in fits if labelled.k is None or k < labelled.k]
    settles = dict.fromkeys(fits, Settle())
    if below:
        tables = [*(labelled.stages[k] for k in below), labelled.answers]
        judged = [*(fits[k] for k in below), final_fits]
        by_prompt = [verdicts_by_prompt(t, f) for t, f in zip(tables, judged, strict=True)]
        prompts = sorted(set.intersection(*(set(d) for d in by_prompt)))
        p = np.array([[d[g][0] for g in prompts] for d in by_prompt])
        flags = np.array([[d[g][1] for g in prompts] for d in by_prompt])
        settles.update(zip(below, fit_settles(p, flags), strict=True))
    return tuple(Stage(k, tuple(used_heads([h.head for h in fits[k]])), settles[k]) for k in sorted(fits))


def used_heads(heads: Sequence[Head]) -> list[Head]:
    """The heads as applied: each without the members it gives no weight (so a result lacking one is still judged
    by it, and the verdict names what it rests on), a head whose members an earlier one of its kind already reads
    dropped. z, p and the threshold are unchanged."""
    out: list[Head] = []
    for head in heads:
        m = head.model
        keep = [i for i, c in enumerate(m.coef) if c != 0.0] or list(range(len(m.coef)))
        model = replace(
            m,
            features=tuple(m.features[i] for i in keep),
            mean=tuple(m.mean[i] for i in keep),
            scale=tuple(m.scale[i] for i in keep),
            coef=tuple(m.coef[i] for i in keep),
        )
        if all(h.members != model.features or h.kind != head.kind for h in out):
            out.append(Head(model, head.operating_point, head.kind))
    return out


def fit_files(
    results: Sequence[Path],
    *,
    label: str = "label",
    settings_from: Path | None = None,
    samples: str | None = None,
    cv: CrossValidation = CV,
    design: Design = DESIGN,
) -> CalibrationFit:
    """Read labelled results files and their settings, and fit a calibration on them.

    Parameters
    ----------
    results : sequence of Path
        JSONL files of scored rows (``bbwd eval``'s ``results.jsonl``) of one settings fingerprint; rows with an
        ``error`` or without a label are skipped.
    label : str, default="label"
        The row field holding the 0/1 label, 1 = hallucination (a row without it: its ``human_score``).
    settings_from : Path or None, default=None
        The reported settings (JSON) the rows were scored with; None: ``settings.json`` beside the first file.
        Its fingerprint must be the rows'.
    samples, cv, design
        As in :func:`fit_calibration`.

    Returns
    -------
    fit : CalibrationFit
    """
    labelled = read_labelled(results, label)
    settings = read_settings(results[0], settings_from, labelled.fingerprint, labelled.k, labelled.settings)
    for k, fp in labelled.fingerprints.items():  # each K's rows: the same settings but K
        if fp is not None and fingerprint({**settings, "k": k}) != fp:
            raise BBWDError(
                f"the rows of K = {k} were scored under other settings than those of K = {labelled.k} "
                f"(fingerprint {fp}, not {fingerprint({**settings, 'k': k})}): calibrate runs that differ only in -k"
            )
    return fit_calibration(
        labelled, settings, source=", ".join(map(str, results)), label=label, samples=samples, cv=cv, design=design
    )
