"""The stages after sampling, each a function: :func:`teacher_pass` (the model: a prompt's samples to their
projected token states, one shared-prefix pass for many prompts) -> :func:`score_states` (CPU: states to D, AvgWD,
EigenWD, the baselines, the judged answer's scores) -> :func:`judge_result` (the calibrated verdict).

``detector.Detector`` runs them with a run's wiring; a prompt that cannot go on carries its BBWDError
(:func:`scoring_failed` is the one text of a failed prompt).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from blackbox_wd.calibration import Calibration
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.measure.sentences import SentenceScore, score_sentences
from blackbox_wd.measure.transport import pairwise_w2, token_costs_to_each, w2_from_token_costs
from blackbox_wd.measure.wd import answer_nll, answer_wd, avg_wd, eigen_wd, median_bandwidth, sentence_wd, unit_states
from blackbox_wd.records import JSONObject, Messages, Sample, SampleSet, TokenStates
from blackbox_wd.run.result import Result
from blackbox_wd.settings import Settings
from blackbox_wd.signals.answers.text import answer_disagreement
from blackbox_wd.signals.baselines import Entails, compute_baselines, discrete_semantic_entropy, exact_match_entails
from blackbox_wd.signals.claims import score_claims
from blackbox_wd.signals.lexical import answer_unigram, unigram_surprise
from blackbox_wd.teachers.card import TeacherCard

if TYPE_CHECKING:
    from blackbox_wd.teachers.statecache import StateStore
    from blackbox_wd.teachers.teacher import Teacher


def token_floor(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> int:
    """Tokens a teacher pass runs for these pairs: each distinct prompt once, each distinct response of it once."""
    prompts = {tuple(p) for p, _ in pairs}
    responses = {(tuple(p), tuple(r)) for p, r in pairs}
    return sum(map(len, prompts)) + sum(len(r) for _, r in responses)


@dataclass
class PromptStates:
    """One prompt after the teacher pass: its samples, their token states, and what the pass cost it."""

    messages: Messages
    samples: SampleSet
    states: list[TokenStates]
    teacher_tokens: int  # tokens forced: the prompt once plus each distinct response once, cached ones not
    teacher_seconds: float  # its share of the pass, in proportion to teacher_tokens
    answer: TokenStates | None = None  # the judged answer's (``samples.answer``), forced with them, not in D
    answer_error: str | None = None  # why ``samples.answer`` could not be forced (the samples still are)
    cached: int = 0  # responses (the judged answer included) read from the state cache, not forced
    answer_offsets: np.ndarray | None = None  # (m, 2) character spans of the answer's tokens in its text


def prompt_pairs(
    teacher: Teacher | TeacherCard, messages: Messages, samples: Sequence[Sample], own_ids: bool = False
) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, response ids) for each sample, checked against the teacher's limits.

    ``own_ids``: the samples come from the teacher's own model, so their token ids are reused as
    they are instead of re-tokenising the text.
    """
    if len(samples) < 2:
        raise BBWDError(f"need at least 2 responses, got {len(samples)}")
    prompt = teacher.prompt_ids(messages)
    pairs = [(prompt, sample_ids(teacher, s, own_ids)) for s in samples]
    for i, pair in enumerate(pairs):
        teacher.check(i, *pair)
    return pairs


def sample_ids(teacher: Teacher | TeacherCard, sample: Sample, own_ids: bool = False) -> list[int]:
    """A sample's token ids: its own (``own_ids``, when it has them) or its text's."""
    return teacher.response_ids(sample.token_ids if own_ids and sample.token_ids is not None else sample.text)


def answer_pair(
    teacher: Teacher | TeacherCard, prompt: list[int], answer: Sample, own_ids: bool = False
) -> tuple[list[int], list[int]]:
    """(prompt ids, the judged answer's ids), checked as the samples are; its errors name the judged answer."""
    pair = (prompt, sample_ids(teacher, answer, own_ids))
    teacher.check(0, *pair, name="judged answer")
    return pair


def item_pairs(
    teacher: Teacher | TeacherCard, messages: Messages, sample_set: SampleSet, own_ids: bool = False
) -> tuple[list[tuple[list[int], list[int]]], np.ndarray | str | None]:
    """A prompt's pairs as the teacher forces them: (prompt ids, response ids) of each sample, then the judged
    answer's when it can be forced; and the answer's token offsets in its text, or why it cannot be forced (None
    without an answer). BBWDError when the samples cannot be (``prompt_pairs``). A teacher's card gives the same
    pairs, without forcing them (``texts``)."""
    own = prompt_pairs(teacher, messages, sample_set.samples, own_ids)
    if sample_set.answer is None:
        return own, None
    try:
        pair = answer_pair(teacher, own[0][0], sample_set.answer, own_ids)
        offsets = teacher.reader.text_offsets(sample_set.answer.text, pair[1])
    except BBWDError as exc:
        return own, str(exc)
    return [*own, pair], offsets


def teacher_pass(
    teacher: Teacher,
    items: Sequence[tuple[Messages, SampleSet]],
    *,
    logprobs: bool = False,
    own_ids: bool = False,
    cache: StateStore | None = None,
) -> list[PromptStates | BBWDError]:
    """Teacher-force several prompts' samples in one shared-prefix pass; an unusable prompt gets its BBWDError.

    The stage between sampling and scoring: it holds the model, and hands on only the projected
    token states (plus one unprojected last-token state per response, and log-probs when asked).
    With a ``cache``, responses already forced after the same prompt are read from it, the others
    forced and stored.
    """
    out: list[PromptStates | BBWDError | None] = [None] * len(items)
    pairs: list[tuple[list[int], list[int]]] = []
    spans: dict[int, slice] = {}
    answers: dict[int, np.ndarray | str] = {}  # its token offsets (forced last in its span), or why it could not be
    for n, (messages, sample_set) in enumerate(items):
        try:
            own, answer_at = item_pairs(teacher, messages, sample_set, own_ids)
        except BBWDError as exc:
            out[n] = exc
            continue
        if answer_at is not None:
            answers[n] = answer_at
        spans[n] = slice(len(pairs), len(pairs) + len(own))
        pairs.extend(own)
    states: list[TokenStates | None] = [None] * len(pairs)
    if cache is not None:
        states = [cache.get(*pair, logprobs) for pair in pairs]
    fresh = [ts is None for ts in states]
    forced = [i for i, f in enumerate(fresh) if f]
    t0 = time.perf_counter()
    for i, ts in zip(
        forced, teacher.encode_ids([pairs[i] for i in forced], logprobs=logprobs) if forced else [], strict=True
    ):
        states[i] = ts
        if cache is not None:
            cache.put(*pairs[i], ts)
    seconds = time.perf_counter() - t0
    done = [ts for ts in states if ts is not None]
    assert len(done) == len(states)  # every pair forced or read from the cache
    floors = {n: token_floor([pairs[i] for i in range(span.start, span.stop) if fresh[i]]) for n, span in spans.items()}
    total = sum(floors.values()) or 1
    for n, span in spans.items():
        messages, sample_set = items[n]
        got, answer, why, offsets = done[span], None, answers.get(n), None
        if isinstance(why, np.ndarray):
            got, answer, why, offsets = got[:-1], got[-1], None, why
        out[n] = PromptStates(
            messages,
            sample_set,
            got,
            floors[n],
            seconds * floors[n] / total,
            answer,
            why,
            cached=fresh[span].count(False),
            answer_offsets=offsets,
        )
    return out  # type: ignore[return-value]


def target_logprobs(sample_set: SampleSet) -> bool:
    """True when every sample carries the target's own per-token log-probs (an API's, or llama.cpp's)."""
    return all(s.token_logprobs for s in sample_set.samples)


def lne_logprobs(lne: bool, sets: Sequence[SampleSet]) -> bool:
    """Whether a teacher pass for LNE must run the whole model: with ``lne``, unless every set carries the target's
    own log-probs (LNE then takes those, and the teacher stops at the layer)."""
    return lne and not all(target_logprobs(s) for s in sets)


def scoring_failed(exc: Exception, what: str = "scoring failed") -> BBWDError:
    """An unexpected exception while scoring, as the error of the prompt that raised it (its cause kept):
    the one text of a failed prompt, ``what: Type: message``."""
    err = BBWDError(f"{what}: {type(exc).__name__}: {one_line(exc)}")
    err.__cause__ = exc
    return err


def teacher_pass_isolated(
    teacher: Teacher,
    items: Sequence[tuple[Messages, SampleSet]],
    *,
    own_ids: bool,
    failed: Callable[[Exception], BBWDError],
    logprobs: bool = False,
    cache: StateStore | None = None,
) -> list[PromptStates | BBWDError]:
    """``teacher_pass`` over all items; if the shared pass raises, each item alone, so that an unexpected
    exception becomes ``failed(exc)`` in the slot of the item that raised it and the others keep their states."""
    try:
        return teacher_pass(teacher, items, logprobs=logprobs, own_ids=own_ids, cache=cache)
    except Exception:  # noqa: BLE001 - narrowed down to the item that caused it below
        out: list[PromptStates | BBWDError] = []
        for item in items:
            try:
                out.append(teacher_pass(teacher, [item], logprobs=logprobs, own_ids=own_ids, cache=cache)[0])
            except Exception as exc:  # noqa: BLE001 - this item's error
                out.append(failed(exc))
        return out


def score_states_isolated(
    ps: PromptStates | BBWDError,
    settings: Settings,
    reported: JSONObject,
    calibration: Calibration | None = None,
    fixed_bandwidth: float | None = None,
    *,
    entails: Entails | None = exact_match_entails,
    replicate: int = 0,
) -> Result | BBWDError:
    """:func:`score_states` with errors as values: a BBWDError (the pass's, or scores the calibration cannot map) as
    it is, another exception as ``scoring failed: ...``, so that the other prompts keep their results."""
    if isinstance(ps, BBWDError):
        return ps
    try:
        return score_states(ps, settings, reported, calibration, fixed_bandwidth, entails=entails, replicate=replicate)
    except BBWDError as exc:  # e.g. scores the calibration cannot map
        return exc
    except Exception as exc:  # noqa: BLE001 - this prompt's error; the others keep their results
        return scoring_failed(exc)


def judged_answer_scores(
    ps: PromptStates, samples: list[np.ndarray], answer_states: np.ndarray | None, replicate: int = 0
) -> tuple[float | None, list[SentenceScore] | None, float | None, float | None]:
    """AnswerWD of the judged answer, its sentences (each with its OT score and lexical surprise), their mean OT
    score and their mean surprise, all OT from one exact plan per sample (``transport.token_costs_to_each``);
    Nones without a forced answer. ``samples`` and ``answer_states`` are the states as transported; ``replicate`` as
    ``transport.pairwise_w2``'s."""
    if answer_states is None or ps.samples.answer is None:
        return None, None, None, None
    costs = token_costs_to_each(answer_states, samples, replicate=replicate)
    answer = answer_wd(w2_from_token_costs(costs))
    if ps.answer_offsets is None:
        return answer, None, None, None
    text = ps.samples.answer.text
    sentences = score_sentences(text, ps.answer_offsets, costs, ps.samples.answer_sentences)
    surprise = unigram_surprise([x.text for x in sentences], [x.text for x in ps.samples.samples], text)
    sentences = [replace(x, unigram=u) for x, u in zip(sentences, surprise, strict=True)]
    return answer, sentences, sentence_wd([x.score for x in sentences]), answer_unigram(surprise)


def transported(states: np.ndarray, norm: str) -> np.ndarray:
    """Token states as the transport sees them under ``Settings.norm``."""
    return unit_states(states) if norm == "unit" else states


def score_states(
    ps: PromptStates,
    settings: Settings,
    reported: JSONObject,
    calibration: Calibration | None = None,
    fixed_bandwidth: float | None = None,
    *,
    entails: Entails | None = exact_match_entails,
    replicate: int = 0,
) -> Result:
    """Every signal of one prompt's token states, and with a calibration its verdict.

    D, AvgWD, EigenWD (the paper's per-prompt bandwidth) and EigenWD with the teacher's fixed bandwidth (when it
    has one); the baselines LS, ES, ER, DSE (with ``entails``, by default equal normalised answers) and LNE (from
    the target's log-probs, else from the teacher's when the pass computed them: ``Detector.lne``), timed apart;
    with a judged answer its AnswerWD, its sentences' OT scores and lexical surprises, and their means.

    Parameters
    ----------
    ps : PromptStates
        The prompt after the teacher pass.
    settings : Settings
        The run's settings (norm, alpha, p, base rate, K).
    reported : dict
        The settings as run, with their fingerprint (``ReportedSettings.as_dict``): the result's ``settings``.
    calibration : Calibration or None
        Gives the result its probability of hallucination, flag and the members it rests on, and each sentence its
        own (with a sentence head); scores it cannot map raise BBWDError.
    fixed_bandwidth : float or None
        The teacher's reference EigenWD bandwidth (``Detector.reference_bandwidth``), or None.
    entails : Entails or None
        DSE's entailment check; None: no DSE.
    replicate : int
        Unequal pairs of states solved by assignment, without POT, up to this common size
        (``transport.pairwise_w2``): ``REPLICATE_MAX`` in a one-prompt run, 0 (all by POT's simplex) otherwise.

    Returns
    -------
    Result
    """
    alpha, p = settings.alpha, settings.p
    t0 = time.perf_counter()
    states = [transported(s.states, settings.resolved_norm) for s in ps.states]
    d = pairwise_w2(states, replicate=replicate)
    eig = eigen_wd(d, alpha, p)
    answer_states = None if ps.answer is None else transported(ps.answer.states, settings.resolved_norm)
    answer, sentences, passage, lexical = judged_answer_scores(ps, states, answer_states, replicate)
    timings = {
        "teacher": ps.teacher_seconds,
        "teacher_tokens": ps.teacher_tokens,
        **({"teacher_cached": ps.cached} if ps.cached else {}),
        "transport": time.perf_counter() - t0,
    }
    samples = ps.samples.samples
    result = Result(
        prompt=ps.messages,
        responses=[s.text for s in samples],
        token_counts=[s.n_tokens for s in ps.states],
        D=d,
        avg_wd=avg_wd(d),
        eigen_wd=eig,
        eigen_wd_fixed=None if fixed_bandwidth is None else eigen_wd(d, alpha, p, bandwidth=fixed_bandwidth),
        settings={**reported, "bandwidth": median_bandwidth(d)},
        usage=ps.samples.usage,
        timings=timings,
        answer_wd=answer,
        answer_error=ps.answer_error,
        sentences=sentences,
        sentence_wd=passage,
        answer_unigram=lexical,
    )
    if ps.samples.answer is not None:
        result.answer_disagreement = answer_disagreement(ps.samples.answer.text, result.responses)
    if ps.samples.claims is not None:
        said = "" if ps.samples.answer is None else ps.samples.answer.text
        asked = "\n".join(m.get("content", "") for m in ps.messages)
        result.claims = score_claims(ps.samples.claims, result.responses, said, asked)
    if answer is not None and ps.answer is not None and ps.answer.logprobs is not None:
        result.answer_nll = answer_nll(ps.answer.logprobs)
        result.cocoa = result.answer_nll * answer
    t1 = time.perf_counter()
    target = target_logprobs(ps.samples)
    teacher = all(s.logprobs is not None for s in ps.states)  # forced only when asked (``lne_logprobs``)
    logprobs: list[Any] | None = (
        [s.token_logprobs for s in samples] if target else [s.logprobs for s in ps.states] if teacher else None
    )
    shown = None if ps.samples.answer is None else ps.samples.answer.text
    result.baselines = compute_baselines(
        result.responses, logprobs=logprobs, embeddings=[s.last for s in ps.states], answer=shown
    )
    result.lne_source = "target" if target else "teacher" if teacher else None
    timings["baselines"] = time.perf_counter() - t1
    if entails is not None:
        t2 = time.perf_counter()
        result.baselines["dse"] = discrete_semantic_entropy(result.responses, entails)
        timings["dse"] = time.perf_counter() - t2
    if calibration is not None:
        judge_result(result, calibration, settings.base_rate, k_max=settings.k if settings.stop is not None else None)
    return result


def judge_result(
    result: Result, calibration: Calibration, base_rate: float | None = None, *, k_max: int | None = None
) -> None:
    """Set the result's verdict (p, flag, the calibration's summary with the members used) from the heads of its
    sample count (``Calibration.fitted_k``) and, with a sentence head, each sentence's p and flag; ``k_max``
    (``-k auto``): whether it is settled at its sample count."""
    k = len(result.responses)
    verdict = calibration.verdict(result, base_rate, k=k)
    result.p_hallucination, result.flag = verdict.p, verdict.flag
    if k_max is not None:
        result.settled = calibration.settled(verdict, k, k_max)
    result.calibration = calibration.summary(verdict, base_rate)
    if result.sentences is not None and calibration.sentence is not None:
        judged = calibration.sentence_verdicts(result.sentences, base_rate)
        result.sentences = [
            x if v is None else replace(x, p_hallucination=v.p, flag=v.flag)
            for x, v in zip(result.sentences, judged, strict=True)
        ]
    if result.claims is not None and calibration.claim is not None:
        claimed = calibration.claim_verdicts(result.claims, result)  # at the claims' own fitted base rate
        result.claims = [
            x if v is None else replace(x, p_hallucination=v.p, flag=v.flag)
            for x, v in zip(result.claims, claimed, strict=True)
        ]
