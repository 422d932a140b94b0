"""Fitting a calibration on labelled results: the combined verdict's heads and the sentence head.

Input: one or more results files (``bbwd eval``'s ``results.jsonl``, all scored under one settings
fingerprint) and the reported settings they were scored with (``settings.json`` beside the first, which
``bbwd eval`` writes, or any file named with ``--settings-from``). A row's label is its ``label`` field (0/1,
1 = hallucination; another field with ``--label``), else its ``human_score`` (in [0, 1]: the share of
inaccurate sentences), which enters as a weighted pair of rows (``combine.table_from``). A row with
``sentences`` and ``sentence_labels`` also gives one row per sentence to the sentence head (label: minor or
major inaccurate). With a sentence head, each answer also gets the member ``sentence_verdict`` from its
sentences (labelled or not) under that head (``members.sentence_verdict``), before the answer heads are fitted.

The members are those every labelled row has (``members.MEMBERS``: a member some rows lack, say DSE on
passages, is left out, since the verdict could not tell its absence from its value); the heads are those
members less each combination of the members a result may lack (the judged answer's, LNE, EigenWD's fixed
bandwidth), down to [AvgWD, ln EigenWD]. When the rows hold both short answers and passages (``members.is_passage``),
the members defined for short answers only (``members.SHORT_ONLY``) are missing on the passages, one more group a
result may lack, and the calibration reads them as missing on a passage it judges. Each head is fitted by
``combine.fit_head`` (``combine.COMBINER`` over the standardised members, the calibrator of lower nested out-of-fold
log-loss, the threshold at the target out-of-fold FPR), every fold grouped by prompt; the sentence head likewise
with ``SENTENCE_COMBINER``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import brier_score_loss, roc_auc_score

from blackbox_wd import __version__
from blackbox_wd.adaptive import Settle
from blackbox_wd.calibration.combine import (
    CannotFlag,
    CrossValidation,
    HeadFit,
    Table,
    enough_prompts,
    first_by_prompt,
    fit_head,
    head_sets,
    heads_on,
    kinds_to_fit,
)
from blackbox_wd.calibration.evaluation.reliability import expected_calibration_error
from blackbox_wd.calibration.heads import FittedOn, Head, RoundHeads
from blackbox_wd.calibration.labelled import LabelledRows, read_labelled, read_settings
from blackbox_wd.calibration.members import (
    ANSWER_LOGPROB_MEMBERS,
    ANSWER_MEMBERS,
    CLAIM_MEMBERS,
    FEATURES,
    MEMBERS,
    SENTENCE_MEMBERS,
    TEACHER_FREE,
    sentence_verdict,
)
from blackbox_wd.calibration.model import Calibration
from blackbox_wd.calibration.settle import fit_settles
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import JSONObject, JSONView
from blackbox_wd.settings import calibration_fingerprint, covered_settings, fingerprint
from blackbox_wd.signals.baselines.peers import ANSWER_PEERS, PEERS

# the sentence head's combiner, chosen on WikiBio by grouped cross-validation (bench/RESULTS.md, "The combined
# verdict": the mean of its NonFact and Factual AUC-PR); the answer heads' is ``combine.COMBINER``
SENTENCE_COMBINER = "mean"
CV = CrossValidation()  # the calibration's: combine.COMBINER, 5 folds, seed 0, target FPR 0.1
# the claim head's: rule 2 of the claim scores' rule (docs/results-notebook.md, "Claim scores"), the standardised
# mean of CLAIM_MEMBERS
CLAIM_COMBINER = "mean"
# members a result may lack, each group at once; the heads that keep the most come first (``head_sets``), so a
# result with a judged answer but no teacher log-probs is judged by a head with the answer's other members
OPTIONAL_GROUPS = (ANSWER_LOGPROB_MEMBERS, ANSWER_MEMBERS, ("lne",), ("log_eigen_wd_fixed",))


@dataclass(frozen=True)
class Design:
    """Which members the heads read: those of short answers (the ``phrase`` and ``sentence`` kinds) and those of the
    others (passages, and the heads over every kind). The heads of each kind of answer are fitted on its rows, then
    the heads over every kind; after these, each is fitted again over its members in ``TEACHER_FREE`` alone: the
    heads that judge a run of a teacher with no calibration of its own (``Calibration.teacher_free``); a run of the
    calibration's own teacher never reaches them."""

    short: tuple[str, ...]
    other: tuple[str, ...]
    phrase: tuple[str, ...] | None = None  # the phrase kind's members, where not ``short``'s

    def of_kind(self, kind: str) -> tuple[str, ...]:
        """The members of the heads of answers of ``kind`` (``members.KINDS``)."""
        if kind == "phrase" and self.phrase is not None:
            return self.phrase
        return self.short if kind in SHORT_KINDS else self.other


# the shipped design: phrases read lm-polygraph's LexicalSimilarity ROUGE-1 and ROUGE-L, the answer's ROUGE-L and its
# disagreement (``PHRASE``); sentences the five peers (``baselines.peers``), the answer's three and its disagreement;
# the others every member but the peers. Chosen by model left out and tested on the kk sets' records 501-1,400
# (bench/RESULTS.md, "Ahead of the peers": the seventeenth rule)
PHRASE = ("lexsim_rouge1", "lexsim_rougel", "answer_rougel", "answer_disagreement")
DESIGN = Design(
    (*PEERS, *ANSWER_PEERS, "answer_disagreement"),
    tuple(m for m in MEMBERS if m not in PEERS and m not in ANSWER_PEERS),
    phrase=PHRASE,
)
SHORT_KINDS = ("phrase", "sentence")


@dataclass
class CalibrationFit:
    """A fitted calibration with the cross-validated fits its summary is made from."""

    calibration: Calibration
    labelled: LabelledRows
    heads: list[HeadFit]  # one per head, in the calibration's order
    sentence: HeadFit | None
    claim: HeadFit | None = None
    left_out: tuple[str, ...] = ()  # why each head left out could not flag (``combine.CannotFlag``)


def fit_calibration(
    labelled: LabelledRows,
    settings: JSONView,
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
    labelled : LabelledRows
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
        ``fit.calibration`` (the :class:`Calibration` to save) and the fits its summary is drawn from.

    Raises
    ------
    BBWDError
        Too few prompts of a class for ``cv.folds``, a bad ``cv.folds`` or ``cv.target_fpr``, or rows that skipped
        the teacher pass (a full fit reads the W2 members).
    """
    samples = samples or settings.get("samples_from")  # recorded rows without either: origin not stated
    if not isinstance(cv.folds, int) or cv.folds < 2:
        raise BBWDError(f"folds must be an integer >= 2 (got {cv.folds})")
    if labelled.teacherless:
        raise BBWDError(
            f"{labelled.teacherless} labelled rows skipped the teacher pass (their AvgWD and EigenWD are null), whose "
            "W2 members a full fit reads: score the log with bbwd batch --all-scores"
        )
    sentence = None
    if labelled.sentences is not None:
        sentence = fit_head(labelled.sentences, SENTENCE_MEMBERS, replace(cv, combiner=sentence_combiner))
    claim = None
    if labelled.claims is not None:
        claim = fit_head(labelled.claims, CLAIM_MEMBERS, replace(cv, combiner=CLAIM_COMBINER))
    if sentence is not None:  # the fit's summary reads the member from the tables
        labelled = replace(
            labelled,
            answers=with_sentence_verdict(labelled.answers, sentence.head, labelled.answer_sentences.get(None, {})),
            rounds={
                k: with_sentence_verdict(t, sentence.head, labelled.answer_sentences.get(k, {}))
                for k, t in labelled.rounds.items()
            },
        )
    t = labelled.answers
    short_only = fittable(t, labelled.short_only, cv.folds)
    members = [m for m in MEMBERS if t.rows([m]).all() or m in short_only]
    optional = (*OPTIONAL_GROUPS, short_only) if short_only else OPTIONAL_GROUPS
    sets = member_sets([m for m in members if m in design.other], optional)
    # a short answer's heads over the design's members, when the rows have any (else over the others', as before it)
    by_kind = {
        kind: member_sets(has, optional) if (has := [m for m in members if m in design.of_kind(kind)]) else sets
        for kind in SHORT_KINDS
    }
    left_out: list[str] = []
    heads = fit_heads(t, sets, cv, by_kind, left_out)
    if not heads:
        raise BBWDError(f"no head can flag on these rows: {'; '.join(left_out)}")
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
    rounds = fit_rounds(labelled, (sets, by_kind), heads, cv, left_out)
    calibration = Calibration(
        heads=(replace(applied[0], kind=None), *applied[1:]),  # the first judges every kind
        fingerprint=calibration_fingerprint(settings),
        settings=covered_settings(settings),
        fitted_on=fitted_on,
        bbwd_version=__version__,
        sentence=None if sentence is None else sentence.head,
        claim=None if claim is None else claim.head,
        rounds=rounds,
        short_only=short_only,
    )
    return CalibrationFit(calibration, labelled, heads, sentence, claim, tuple(left_out))


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
    by_kind: Mapping[str, Sequence[Sequence[str]]] | None = None,
    left_out: list[str] | None = None,
) -> list[HeadFit]:
    """The heads over every row (``sets``, most members first), then those of each kind of answer with rows enough
    (``combine.kinds_to_fit``; a kind in ``by_kind`` over its sets there), each set less the members its kind's rows
    lack, fitted on that kind's rows alone; a
    kind's head whose rows a head over every row already holds alone (a short-answer member's) is that head, not
    fitted twice but kept in the kind's order (so a kind's later head with fewer members never judges first).
    A head that cannot flag (``combine.CannotFlag``) is left out, and why is appended to ``left_out``."""
    by_kind = by_kind or {}
    dropped = [] if left_out is None else left_out

    def flagging(*args: Any, **kwargs: Any) -> HeadFit | None:
        try:
            return fit_head(*args, **kwargs)
        except CannotFlag as e:
            dropped.append(str(e))
            return None

    general = [h for head in sets if (h := flagging(t, head, cv)) is not None]
    fitted = {(h.head.members, h.rows.tobytes()): h for h in general}
    of_kinds = [
        replace(same, head=replace(same.head, kind=kind))
        if (same := fitted.get((head, (t.rows(head) & (t.kind == kind)).tobytes()))) is not None
        else flagging(t, head, cv, kind=kind)
        for kind in kinds_to_fit(t, cv.folds)
        for head in heads_on(t, by_kind.get(kind, sets), kind)
    ]
    return general + [h for h in of_kinds if h is not None]


def with_sentence_verdict(t: Table, head: Head, sentences: Mapping[str, list[JSONObject]]) -> Table:
    """The table with the member ``sentence_verdict`` of each row's answer, from its sentences under the sentence
    ``head`` (NaN where it has none)."""
    by_prompt = {g: sentence_verdict(head, x) for g, x in sentences.items()}
    column = np.array([np.nan if (v := by_prompt.get(g)) is None else v for g in t.groups])
    return replace(t, members={**t.members, "sentence_verdict": column})


def fittable(t: Table, short_only: Sequence[str], folds: int) -> tuple[str, ...]:
    """The members of ``short_only`` (missing on the passages of ``t``) whose rows hold each class in at least
    ``2 * folds`` prompts, as a head over them needs; the others are left out of every head."""
    return tuple(m for m in short_only if enough_prompts(t, t.rows([m]), folds))


def verdicts_by_prompt(t: Table, fits: Sequence[HeadFit]) -> dict[str, tuple[float, bool]]:
    """Each prompt's nested out-of-fold p and flag from the first head that has its members, as it is judged."""
    return first_by_prompt(
        (t.groups[hf.rows], [(float(p), bool(p >= hf.head.operating_point.threshold)) for p in hf.p]) for hf in fits
    )


def fit_rounds(
    labelled: LabelledRows,
    sets: tuple[Sequence[Sequence[str]], Mapping[str, Sequence[Sequence[str]]]],
    final_fits: Sequence[HeadFit],
    cv: CrossValidation,
    left_out: list[str] | None = None,
) -> tuple[RoundHeads, ...]:
    """The heads of every other sample count (the same member sets, ``(other, by_kind)`` as in ``fit_heads``, less
    the members no row of it has; fitted on its rows) and, for each below the main K, its ``-k auto`` band
    (``settle.fit_settles`` over each prompt's nested out-of-fold p and flag from the head that judges it, at every
    round below K and at K, on the prompts scored at all of them); above K, no band."""
    if not labelled.rounds:
        return ()
    other, by_kind = sets
    fits = {
        k: fit_heads(t, heads_on(t, other), cv, {kind: heads_on(t, s) for kind, s in by_kind.items()}, left_out)
        for k, t in labelled.rounds.items()
    }
    below = [k for k in fits if labelled.k is None or k < labelled.k]
    settles = dict.fromkeys(fits, Settle())
    if below:
        tables = [*(labelled.rounds[k] for k in below), labelled.answers]
        judged = [*(fits[k] for k in below), final_fits]
        by_prompt = [verdicts_by_prompt(t, f) for t, f in zip(tables, judged, strict=True)]
        prompts = sorted(set.intersection(*(set(d) for d in by_prompt)))
        p = np.array([[d[g][0] for g in prompts] for d in by_prompt])
        flags = np.array([[d[g][1] for g in prompts] for d in by_prompt])
        settles.update(zip(below, fit_settles(p, flags), strict=True))
    return tuple(RoundHeads(k, tuple(used_heads([h.head for h in fits[k]])), settles[k]) for k in sorted(fits))


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
