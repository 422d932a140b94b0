"""The texts' stage, beside the teacher pass: a prompt whose verdict reads no member of the teacher's is judged from
its samples' texts alone (:func:`text_result`) and never forced.

Which head judges a prompt depends on its kind of answer (``members.answer_kind``: the median of its samples' token
counts, which the teacher's tokenizer gives without its weights) and on the members it has. :func:`reads_teacher`
asks the calibration for the head it would choose were every member of the teacher there; when that head reads
the texts' members alone (``text_members``: ``TEXT_MEMBERS``, with LNE from the target's log-probs and a passage's
lexical surprise), it is the head that judges the prompt with the teacher's members too:
the heads before it lack a member of the texts, which the teacher does not change. So p and the flag are the same
with and without the teacher pass (``Detector.all_scores``), and the fields only the teacher gives are None.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.members import (
    ANSWER_MEMBERS,
    MEMBERS,
    SENTENCE_MEMBERS,
    answer_kind,
    member_value,
    result_field,
)
from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.sentences import answer_spans
from blackbox_wd.records import JSONObject, JSONView, Messages, SampleSet
from blackbox_wd.run.result import Result
from blackbox_wd.run.stages import item_pairs, judge_result, scoring_failed, target_logprobs
from blackbox_wd.settings import Settings
from blackbox_wd.signals.answers.text import answer_disagreement
from blackbox_wd.signals.baselines import PEERS, Entails, compute_baselines, discrete_semantic_entropy
from blackbox_wd.signals.baselines.peers import ANSWER_PEERS
from blackbox_wd.signals.claims import score_claims
from blackbox_wd.signals.lexical import answer_unigram, unigram_surprise
from blackbox_wd.teachers.card import TeacherCard

if TYPE_CHECKING:
    from blackbox_wd.teachers.teacher import Teacher

# The members text_result gives as score_states gives them (LNE too when the target gave its log-probs)
TEXT_MEMBERS = frozenset(("ls", "dse", "answer_disagreement", *PEERS, *ANSWER_PEERS))
SKIPPED = "their verdict reads the texts alone, no teacher member"


def text_members(lne: bool, answer_unigram: bool) -> frozenset[str]:
    """The members :func:`text_result` gives as the teacher's run gives them: ``TEXT_MEMBERS``; LNE where every
    sample carries the target's log-probs (``lne``); the judged answer's lexical surprise where it gave it (a
    passage's, ``answer_unigram``)."""
    return TEXT_MEMBERS | {name for name, given in (("lne", lne), ("answer_unigram", answer_unigram)) if given}


def stand_in(result: Result | JSONView, forced_answer: bool, readable: frozenset[str]) -> dict[str, Any]:
    """A row of the members of a result (or a row) as the calibration reads them (``members.member_value``), with 1.0
    for every member outside ``readable``: one the teacher's run may give (an answer's only with an answer it can
    force)."""
    baselines = dict(result_field(result, "baselines") or {})
    row: dict[str, Any] = {"token_counts": result_field(result, "token_counts"), "baselines": baselines}
    for name in readable & set(MEMBERS):
        row[name] = member_value(result, name)
    for name in set(MEMBERS) - readable:
        if name in ANSWER_MEMBERS and not forced_answer:
            continue
        row[name.removeprefix("log_")] = 1.0
    if forced_answer:
        row["sentences"] = [dict.fromkeys(SENTENCE_MEMBERS, 1.0)]
    return row


def reads_teacher(
    calibration: Calibration | None, result: Result | JSONView, forced_answer: bool, readable: frozenset[str]
) -> bool:
    """True when the prompt's verdict may read a member only the teacher gives, so that it must be forced.

    Parameters
    ----------
    calibration : Calibration or None
        The run's; None (no verdict): the scores are what the run gives, all of them.
    result : Result or mapping
        The prompt's :func:`text_result` (its token counts, and the members of its texts), or a row of it.
    forced_answer : bool
        The judged answer can be forced (its members may be there).
    readable : frozenset of str
        The members the result holds as the teacher's run would (``text_members``).

    Returns
    -------
    bool
        True without a calibration, for claims that a claim head judges (it reads AvgWD), and where the head
        chosen with every teacher member there (``Calibration.head_for``, at the result's K) reads one, or none fits.
    """
    if calibration is None or (result_field(result, "claims") is not None and calibration.claim is not None):
        return True
    k = len(result_field(result, "token_counts") or [])
    try:
        head, _ = calibration.head_for(stand_in(result, forced_answer, readable), k)
    except BBWDError:  # no head fits: the teacher's run says which members are missing
        return True
    return not set(head.members) <= readable


def row_reads_teacher(calibration: Calibration, row: JSONView) -> bool:
    """True when a row that skipped the teacher pass (``avg_wd`` null) would be forced under ``calibration``: its
    verdict there may read a teacher member (:func:`reads_teacher`), which the row has not.

    Parameters
    ----------
    calibration : Calibration
    row : mapping
        A batch row (its token counts, baselines and answer's members).

    Returns
    -------
    bool
        False for a row forced when it was scored (it has AvgWD).
    """
    if row.get("avg_wd") is not None:
        return False
    forced_answer = row.get("answer_disagreement") is not None and row.get("answer_error") is None
    readable = text_members("lne" in (row.get("baselines") or {}), row.get("answer_unigram") is not None)
    return reads_teacher(calibration, row, forced_answer, readable)


def text_result(
    teacher: Teacher | TeacherCard,
    messages: Messages,
    sample_set: SampleSet,
    settings: Settings,
    reported: JSONObject,
    *,
    own_ids: bool = False,
) -> tuple[Result, bool]:
    """A prompt's result from its samples' texts: the token counts by the teacher's tokenizer, LS, the peers, LNE
    from the target's log-probs, the judged answer's disagreement and peers (and a passage's lexical surprise), the
    claims' scores; None for what only the teacher gives (D, AvgWD, EigenWD, the answer's W2 and sentences, ES, ER).

    Parameters
    ----------
    teacher : Teacher or TeacherCard
        Its tokenizer and context check the samples as the teacher pass does (the same BBWDError).
    messages, sample_set
        The prompt and its samples.
    settings : Settings
    reported : dict
        The settings as run, with their fingerprint (``ReportedSettings.as_dict``).
    own_ids : bool
        The samples' own token ids count, as the teacher pass reads them.

    Returns
    -------
    tuple of (Result, bool)
        The result (no DSE, no verdict yet: ``texts_or_teacher``), and whether its judged answer can be forced.
    """
    pairs, answer = item_pairs(teacher, messages, sample_set, own_ids)
    counts = [len(r) for _, r in pairs[: len(sample_set.samples)]]
    t0 = time.perf_counter()
    samples = sample_set.samples
    result = Result(
        prompt=messages,
        responses=[s.text for s in samples],
        token_counts=counts,
        D=None,
        avg_wd=None,
        eigen_wd=None,
        settings={**reported, "bandwidth": None},
        usage=sample_set.usage,
        answer_error=answer if isinstance(answer, str) else None,
    )
    if sample_set.answer is not None:
        result.answer_disagreement = answer_disagreement(sample_set.answer.text, result.responses)
    if sample_set.claims is not None:
        said = "" if sample_set.answer is None else sample_set.answer.text
        asked = "\n".join(m.get("content", "") for m in messages)
        result.claims = score_claims(sample_set.claims, result.responses, said, asked)
    target = target_logprobs(sample_set)
    shown = None if sample_set.answer is None else sample_set.answer.text
    logprobs: list[Any] | None = [s.token_logprobs for s in samples] if target else None
    result.baselines = compute_baselines(result.responses, logprobs=logprobs, answer=shown)
    result.lne_source = "target" if target else None
    if sample_set.answer is not None and isinstance(answer, np.ndarray) and answer_kind(result) == "passage":
        # the lexical surprise a passage's heads of the texts alone read, as the teacher pass gives it (spaCy's
        # sentences: not for a shorter answer, whose heads read other members)
        text = sample_set.answer.text
        sentences = [s.text for s in answer_spans(text, sample_set.answer_sentences)]
        result.answer_unigram = answer_unigram(unigram_surprise(sentences, result.responses, text))
    result.timings = {"baselines": time.perf_counter() - t0}
    return result, isinstance(answer, np.ndarray)


def texts_or_teacher(
    teacher: Teacher | TeacherCard,
    items: list[tuple[Messages, SampleSet]],
    settings: Settings,
    reported: JSONObject,
    calibration: Calibration | None,
    *,
    own_ids: bool,
    entails_each: list[Entails | None],
    verdicts: bool = True,
) -> list[Result | BBWDError | None]:
    """Each prompt's verdict from its texts where it reads no teacher member (:func:`reads_teacher`), its error
    where its samples cannot be forced (the teacher pass's), else None: the teacher forces it.

    Parameters
    ----------
    teacher : Teacher or TeacherCard
        The teacher, or its card: its tokenizer only.
    items : list of (messages, SampleSet)
    settings : Settings
    reported : dict
        The settings as run, with their fingerprint.
    calibration : Calibration or None
        The run's.
    own_ids : bool
        The samples' own token ids count (``Detector.own_ids``).
    entails_each : list of Entails or None
        DSE's entailment check of each prompt (a check gives DSE a value: there for the decision, computed only for
        a verdict).
    verdicts : bool
        Give those judged from their texts their DSE and verdict; False: only decide (``Detector.all_scores`` forces
        them after the others), their Result without.

    Returns
    -------
    list of Result, BBWDError or None
        In the order of ``items``.
    """
    out: list[Result | BBWDError | None] = []
    k_max = settings.k if settings.stop is not None else None
    for (messages, sample_set), entails in zip(items, entails_each, strict=True):
        if calibration is None:
            out.append(None)
            continue
        try:
            result, forced_answer = text_result(teacher, messages, sample_set, settings, reported, own_ids=own_ids)
            dse = {"dse": 0.0} if entails is not None else {}  # a check's DSE is a number: there, whatever its value
            decided = replace(result, baselines={**result.baselines, **dse})
            readable = text_members(target_logprobs(sample_set), result.answer_unigram is not None)
            if reads_teacher(calibration, decided, forced_answer, readable):
                out.append(None)
                continue
            if verdicts and entails is not None:
                t0 = time.perf_counter()
                result.baselines["dse"] = discrete_semantic_entropy(result.responses, entails)
                result.timings["dse"] = time.perf_counter() - t0
            if verdicts:
                judge_result(result, calibration, settings.base_rate, k_max=k_max)
        except BBWDError as exc:  # the samples cannot be forced: the teacher pass says the same
            out.append(exc)
            continue
        except Exception as exc:  # noqa: BLE001 - this prompt's error; the others keep their results
            out.append(scoring_failed(exc))
            continue
        out.append(result)
    return out
