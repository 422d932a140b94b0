"""The one path from a prompt to scores: samples -> token states -> D -> AvgWD, EigenWD.

Two stage functions carry it: :func:`teacher_pass` (the model: a prompt's samples to their
projected token states, one shared-prefix pass for many prompts) and :func:`score_states` (CPU:
states to D, AvgWD, EigenWD, the baselines, the calibrated probability). :class:`Scorer` wires them
for a run (teacher, reported settings, calibration), and every front door scores through it:
``Detector`` (``score``, ``eval``), ``batch``'s local and Ray engines, and the server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from blackbox_wd.baselines import Entails, compute_baselines, discrete_semantic_entropy
from blackbox_wd.calibration import Calibration
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams, TokenStates, Usage, as_messages
from blackbox_wd.scores import answer_wd, avg_wd, eigen_wd, median_bandwidth, sentence_wd
from blackbox_wd.sampling import RecordedSamples, Sampler, endpoint_host, sampler_name, shares_model
from blackbox_wd.sentences import SentenceScore, score_sentences
from blackbox_wd.settings import ReportedSettings, Settings
from blackbox_wd.teachers.hf import HFTeacher, load_teacher
from blackbox_wd.teachers.statecache import StateCache
from blackbox_wd.transport import pairwise_w2, token_costs_to_each, w2_from_token_costs


@dataclass
class Result:
    """Scores of one prompt with the responses, D and the exact settings that produced them."""

    prompt: Messages
    responses: list[str]
    token_counts: list[int]
    D: np.ndarray
    avg_wd: float
    eigen_wd: float
    settings: dict[str, Any]
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    baselines: dict[str, float] = field(default_factory=dict)
    lne_source: str | None = None  # "target" (its own token log-probs: an API's, llama.cpp's) or "teacher" (forced)
    p_hallucination: float | None = None  # with a calibration: its probability of hallucination
    flag: bool | None = None  # with a calibration: p_hallucination >= its threshold
    calibration: dict[str, Any] | None = None  # with a calibration: its ``summary()``
    answer_wd: float | None = None  # with a judged answer: AnswerWD, its mean W2 to the K samples
    answer_error: str | None = None  # why a judged answer given has no AnswerWD (e.g. over the context)
    sentences: list[SentenceScore] | None = None  # with a judged answer: its sentences, each scored (``sentences``)
    sentence_wd: float | None = None  # with a judged answer: the mean of its sentences' scores that are not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (D as nested lists)."""
        out = asdict(self)
        out["D"] = self.D.tolist()
        return out


def token_floor(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> int:
    """Tokens a teacher pass runs for these pairs: each distinct prompt once, each distinct response of it once."""
    prompts = {tuple(p) for p, _ in pairs}
    responses = {(tuple(p), tuple(r)) for p, r in pairs}
    return sum(map(len, prompts)) + sum(len(r) for _, r in responses)


def scores_from_states(states: list[TokenStates], alpha: float, p: float) -> tuple[np.ndarray, float, float]:
    """D, AvgWD and EigenWD from the projected token states of the K responses."""
    d = pairwise_w2([s.states for s in states])
    return d, avg_wd(d), eigen_wd(d, alpha, p)


@dataclass(frozen=True)
class Scorer:
    """A run's scoring wiring, the one object every front door scores with.

    It holds the teacher (None where only the CPU stage runs: Ray's score tasks), whether the
    samples' token ids are reused (``own_ids``: the sampler shares the teacher's model), the typed
    reported settings with their fingerprint (and so alpha and p), and the calibration, checked
    against those settings. A per-prompt output is added in :meth:`score` alone.
    """

    reported: ReportedSettings
    teacher: HFTeacher | None = None
    own_ids: bool = False
    calibration: Calibration | None = None
    cache: StateCache | None = None  # teacher states kept on disk (``bbwd eval``); None: every response forced
    lne: bool = True  # with baselines, run the teacher's upper layers and output head for LNE

    def __post_init__(self) -> None:
        if self.calibration is not None:
            self.calibration.check(self.reported.as_dict())

    @classmethod
    def wire(cls, teacher: HFTeacher, sampler: object, settings: Settings, calibration: Calibration | None = None,
             cache: StateCache | None = None, lne: bool = True) -> "Scorer":
        """The wiring of a teacher and a sampler under these settings (the calibration checked against them)."""
        reported = ReportedSettings.of(settings, teacher, endpoint_host(sampler), str(teacher.device),
                                       recorded=isinstance(sampler, RecordedSamples), sampler=sampler_name(sampler))
        return cls(reported, teacher, shares_model(sampler, teacher), calibration, cache, lne)

    @property
    def settings(self) -> Settings:
        """The run's settings."""
        return self.reported.settings

    @property
    def fingerprint(self) -> str:
        """The fingerprint of the settings that change a prompt's score (``settings.fingerprint``)."""
        return self.reported.fingerprint

    def teacher_pass(self, items: Sequence[tuple[Messages, SampleSet]], *, logprobs: bool = False,
                     failed: str = "scoring failed") -> list[PromptStates | BBWDError]:
        """One shared-prefix teacher pass over the items (``teacher_pass_isolated``); an exception of the pass
        becomes the error ``failed: ...`` of the item that raised it."""
        return teacher_pass_isolated(self.teacher, items, own_ids=self.own_ids, logprobs=logprobs,
                                     failed=lambda exc: scoring_failed(exc, failed), cache=self.cache)

    def score(self, ps: PromptStates, *, baselines: bool = False, judge: Entails | None = None) -> Result:
        """The Result of one prompt's token states (``score_states``); raises on failure."""
        return score_states(ps, self, baselines=baselines, judge=judge)

    def outcome(self, ps: PromptStates | BBWDError, *, baselines: bool = False,
                judge: Entails | None = None) -> Result | BBWDError:
        """:meth:`score` with errors as values: a BBWDError as it is, anything else as ``scoring failed: ...``."""
        if isinstance(ps, BBWDError):
            return ps
        try:
            return self.score(ps, baselines=baselines, judge=judge)
        except BBWDError as exc:  # e.g. scores the calibration cannot map
            return exc
        except Exception as exc:  # noqa: BLE001 - this prompt's error; the others keep their results
            return scoring_failed(exc)

    def score_many(self, items: list[tuple[Messages, SampleSet]], baselines: bool = False,
                   judges: Sequence[Entails | None] | None = None) -> list[Result | BBWDError]:
        """Score several prompts with one shared-prefix teacher pass over all their responses.

        A prompt whose input is unusable (fewer than 2 responses, an empty or over-long response),
        or whose part of the pass raised, gets its BBWDError in its slot; the others are scored.
        With ``baselines`` the pass runs the full model (LNE needs log-probs; not without ``lne``) and LNE, LS, ES, ER
        (and DSE where ``judges`` gives an entailment judge for the prompt) are computed on the same
        samples; the timings hold ``baselines`` (LNE, LS, ES, ER) and ``dse`` apart.
        """
        passed = self.teacher_pass(items, logprobs=baselines and lne_logprobs(self.lne, [s for _, s in items]))
        return [self.outcome(ps, baselines=baselines, judge=judges[n] if judges else None)
                for n, ps in enumerate(passed)]


class Detector:
    """Scores prompts with a teacher and a target sampler under fixed settings.

    With a ``calibration`` (refused unless it was fitted for these settings) every result also
    gets its probability of hallucination and flag.
    """

    def __init__(self, teacher: HFTeacher, sampler: Sampler, settings: Settings,
                 calibration: Calibration | None = None, cache: StateCache | None = None, lne: bool = True) -> None:
        self.teacher = teacher
        self.sampler = sampler
        self.settings = settings
        self.calibration = calibration
        self.cache = cache  # the teacher-state cache (``bbwd eval``), see ``Scorer.cache``
        self.lne = lne
        if calibration is not None:
            Scorer.wire(teacher, sampler, settings, calibration)  # refused unless fitted for these settings

    @classmethod
    def from_settings(cls, settings: Settings, calibration: Calibration | None = None) -> "Detector":
        """Load the teacher and build the sampler the settings name."""
        from blackbox_wd.clients import api_sampler_for, local_sampler_for

        api = api_sampler_for(settings)  # first: a missing API key fails before any model loads
        teacher = load_teacher(settings.teacher, settings.device, settings.dtype, settings.layer, settings.token_budget)
        return cls(teacher, api or local_sampler_for(settings, teacher), settings, calibration)

    @classmethod
    def for_recorded(cls, settings: Settings) -> "Detector":
        """Load the teacher only: the samples come recorded with the data (``RecordedSamples``)."""
        teacher = load_teacher(settings.teacher, settings.device, settings.dtype, settings.layer, settings.token_budget)
        return cls(teacher, RecordedSamples(), settings)

    def with_calibration(self, calibration: Calibration | None) -> "Detector":
        """The same teacher and sampler with another calibration (checked against the settings)."""
        return Detector(self.teacher, self.sampler, self.settings, calibration, self.cache, self.lne)

    @property
    def scorer(self) -> Scorer:
        """The scoring wiring of this detector's teacher, sampler, settings and calibration."""
        return Scorer.wire(self.teacher, self.sampler, self.settings, self.calibration, self.cache, self.lne)

    def reported_settings(self, d: np.ndarray | None = None) -> dict[str, Any]:
        """The settings as run (resolved layer, projection, API endpoint, fingerprint; D's bandwidth when given)."""
        out = Scorer.wire(self.teacher, self.sampler, self.settings).reported.as_dict()
        if d is not None:
            out["bandwidth"] = median_bandwidth(d)
        return out

    def fingerprint(self) -> str:
        """The fingerprint of the settings that change a prompt's score (``settings.fingerprint``)."""
        return self.reported_settings()["fingerprint"]

    def score(self, prompt: str | Messages, responses: list[str] | None = None, answer: str | None = None) -> Result:
        """Sample K responses (unless given), teacher-force them, and score; with ``answer`` (the answer to check)
        also its AnswerWD and its sentences' scores."""
        messages = as_messages(prompt)
        t0 = time.perf_counter()
        sample_set = SampleSet([Sample(r) for r in responses]) if responses is not None else \
            self.sampler.sample(messages, self.settings.sampling())
        if answer is not None:
            sample_set.answer = Sample(answer)
        return self.score_samples(messages, sample_set, {"sample": time.perf_counter() - t0})

    def score_samples(self, messages: Messages, sample_set: SampleSet,
                      timings: dict[str, float] | None = None) -> Result:
        """Teacher-force and score samples that are already drawn."""
        result = self.score_many([(messages, sample_set)])[0]
        if isinstance(result, BBWDError):
            raise result
        result.timings = {**(timings or {}), **result.timings}
        return result

    def score_many(self, items: list[tuple[Messages, SampleSet]], baselines: bool = False,
                   judges: Sequence[Entails | None] | None = None) -> list[Result | BBWDError]:
        """:meth:`Scorer.score_many` with this detector's wiring."""
        return self.scorer.score_many(items, baselines, judges)


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


def prompt_pairs(teacher: HFTeacher, messages: Messages, samples: Sequence[Sample],
                 own_ids: bool = False) -> list[tuple[list[int], list[int]]]:
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


def sample_ids(teacher: HFTeacher, sample: Sample, own_ids: bool = False) -> list[int]:
    """A sample's token ids: its own (``own_ids``, when it has them) or its text's."""
    return teacher.response_ids(sample.token_ids if own_ids and sample.token_ids is not None else sample.text)


def answer_pair(teacher: HFTeacher, prompt: list[int], answer: Sample, own_ids: bool = False) -> tuple[list[int], list[int]]:
    """(prompt ids, the judged answer's ids), checked as the samples are; its errors name the judged answer."""
    pair = (prompt, sample_ids(teacher, answer, own_ids))
    teacher.check(0, *pair, name="judged answer")
    return pair


def teacher_pass(teacher: HFTeacher, items: Sequence[tuple[Messages, SampleSet]], *, logprobs: bool = False,
                 own_ids: bool = False, cache: StateCache | None = None) -> list[PromptStates | BBWDError]:
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
            own = prompt_pairs(teacher, messages, sample_set.samples, own_ids)
        except BBWDError as exc:
            out[n] = exc
            continue
        if sample_set.answer is not None:
            try:
                own.append(answer_pair(teacher, own[0][0], sample_set.answer, own_ids))
                answers[n] = teacher.reader.text_offsets(sample_set.answer.text, own[-1][1])
            except BBWDError as exc:
                answers[n] = str(exc)
        spans[n] = slice(len(pairs), len(pairs) + len(own))
        pairs.extend(own)
    states: list[TokenStates | None] = [None] * len(pairs)
    if cache is not None:
        states = [cache.get(*pair, logprobs) for pair in pairs]
    fresh = [ts is None for ts in states]
    forced = [i for i, f in enumerate(fresh) if f]
    t0 = time.perf_counter()
    for i, ts in zip(forced, teacher.encode_ids([pairs[i] for i in forced], logprobs=logprobs) if forced else []):
        states[i] = ts
        if cache is not None:
            cache.put(*pairs[i], ts)
    seconds = time.perf_counter() - t0
    floors = {n: token_floor([pairs[i] for i in range(span.start, span.stop) if fresh[i]]) for n, span in spans.items()}
    total = sum(floors.values()) or 1
    for n, span in spans.items():
        messages, sample_set = items[n]
        got, answer, why, offsets = states[span], None, answers.get(n), None
        if isinstance(why, np.ndarray):
            got, answer, why, offsets = got[:-1], got[-1], None, why
        out[n] = PromptStates(messages, sample_set, got, floors[n], seconds * floors[n] / total, answer, why,  # type: ignore[arg-type]
                              cached=fresh[span].count(False), answer_offsets=offsets)
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


def teacher_pass_isolated(teacher: HFTeacher, items: Sequence[tuple[Messages, SampleSet]], *, own_ids: bool,
                          failed: Callable[[Exception], BBWDError], logprobs: bool = False,
                          cache: StateCache | None = None) -> list[PromptStates | BBWDError]:
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


def judged_answer_scores(ps: PromptStates) -> tuple[float | None, list[SentenceScore] | None, float | None]:
    """AnswerWD of the judged answer, its sentences' scores and their mean, all from one exact plan per sample
    (``transport.token_costs_to_each``); Nones without a forced answer."""
    if ps.answer is None:
        return None, None, None
    costs = token_costs_to_each(ps.answer.states, [s.states for s in ps.states])
    answer = answer_wd(w2_from_token_costs(costs))
    if ps.answer_offsets is None:
        return answer, None, None
    sentences = score_sentences(ps.samples.answer.text, ps.answer_offsets, costs, ps.samples.answer_sentences)
    return answer, sentences, sentence_wd([s.score for s in sentences])


def score_states(ps: PromptStates, scorer: Scorer, *, baselines: bool = False,
                 judge: Entails | None = None) -> Result:
    """D, AvgWD and EigenWD (and with ``baselines`` LNE, LS, ES, ER, and DSE when a ``judge`` is given,
    timed apart) of one prompt's token states, under the scorer's settings; with a judged answer its
    AnswerWD, sentence scores and sentence_wd (``judged_answer_scores``).

    With the scorer's calibration the result also gets its probability of hallucination and flag;
    scores it cannot map raise BBWDError.
    """
    settings, calibration = scorer.settings, scorer.calibration
    alpha, p = settings.alpha, settings.p
    reported = scorer.reported.as_dict()
    t0 = time.perf_counter()
    d, avg, eig = scores_from_states(ps.states, alpha, p)
    answer, sentences, passage = judged_answer_scores(ps)
    timings = {"teacher": ps.teacher_seconds, "teacher_tokens": ps.teacher_tokens,
               **({"teacher_cached": ps.cached} if ps.cached else {}), "transport": time.perf_counter() - t0}
    samples = ps.samples.samples
    result = Result(prompt=ps.messages, responses=[s.text for s in samples],
                    token_counts=[s.n_tokens for s in ps.states], D=d, avg_wd=avg, eigen_wd=eig,
                    settings={**reported, "bandwidth": median_bandwidth(d)}, usage=ps.samples.usage, timings=timings,
                    answer_wd=answer, answer_error=ps.answer_error, sentences=sentences, sentence_wd=passage)
    if baselines:
        t1 = time.perf_counter()
        target = scorer.lne and target_logprobs(ps.samples)
        teacher = all(s.logprobs is not None for s in ps.states)  # forced only when asked (``lne_logprobs``)
        logprobs = [s.token_logprobs for s in samples] if target else [s.logprobs for s in ps.states] if teacher else None
        result.baselines = compute_baselines(result.responses, logprobs=logprobs,
                                             embeddings=[s.last for s in ps.states])
        result.lne_source = "target" if target else "teacher" if teacher else None
        timings["baselines"] = time.perf_counter() - t1
        if judge is not None:
            t2 = time.perf_counter()
            result.baselines["dse"] = discrete_semantic_entropy(result.responses, judge)
            timings["dse"] = time.perf_counter() - t2
    if calibration is not None:
        result.p_hallucination = calibration.predict(result)
        result.flag = calibration.flag(result.p_hallucination)
        result.calibration = calibration.summary()
    return result
