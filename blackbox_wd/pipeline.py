"""The one path from a prompt to a verdict: samples -> token states -> D -> scores -> verdict.

Two stage functions carry it: :func:`teacher_pass` (the model: a prompt's samples to their
projected token states, one shared-prefix pass for many prompts) and :func:`score_states` (CPU:
states to D, AvgWD, EigenWD, the baselines, the calibrated probability). :class:`Detector` is a run's
wiring (teacher, sampler, reported settings, calibration, group size), built once by
:meth:`Detector.from_settings`, and every door scores through it: ``score``, ``batch``'s local and Ray
engines, ``eval``, the server and the Python API. :func:`result_row` is the one serialization of a result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from blackbox_wd.baselines import Entails, compute_baselines, discrete_semantic_entropy, exact_match_entails
from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.model import ANSWER_LOGPROB_MEMBERS, MEMBERS
from blackbox_wd.claims import ClaimScore, claim_dicts, score_claims
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.lexical import answer_unigram, unigram_surprise
from blackbox_wd.records import Messages, Sample, SampleSet, TokenStates, Usage, as_messages
from blackbox_wd.sampling import RecordedSamples, endpoint_host, sampler_name, shares_model
from blackbox_wd.scores import answer_nll, answer_wd, avg_wd, eigen_wd, median_bandwidth, sentence_wd, unit_states
from blackbox_wd.sentences import SentenceScore, score_sentences, sentence_dicts
from blackbox_wd.settings import GROUP_SIZE, ReportedSettings, Settings, check_group_size
from blackbox_wd.teachers.hf import HFTeacher, load_teacher
from blackbox_wd.teachers.registry import reference_bandwidth
from blackbox_wd.teachers.statecache import StateCache
from blackbox_wd.transport import pairwise_w2, token_costs_to_each, w2_from_token_costs

if TYPE_CHECKING:
    from blackbox_wd.clients.api import APIOptions


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
    eigen_wd_fixed: float | None = None  # EigenWD with the teacher's reference bandwidth (when it has one)
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
    claims: list[ClaimScore] | None = None  # with claims given: each scored (``claims.score_claims``)
    answer_unigram: float | None = None  # with a judged answer: the mean of its sentences' lexical surprises
    answer_nll: float | None = None  # with a judged answer and the teacher's log-probs: its mean -log p of its tokens
    cocoa: float | None = None  # with answer_nll: answer_nll x answer_wd, confidence times consistency
    settled: bool | None = None  # -k auto, with a calibration: the verdict at these samples stops drawing
    stages: list[dict[str, Any]] | None = None  # -k auto: each stage looked at (``rounds.stage_entry``)

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (``result_row`` of RESULT_FIELDS)."""
        return result_row(self, (*RESULT_FIELDS, "n_samples", "target_tokens"))

    @property
    def target_tokens(self) -> int:
        """Tokens the target generated for the samples scored: the API's completion tokens (fresh and from the
        cache) when it was called, else the samples' tokens by the teacher's tokenizer (a local target's own)."""
        u = self.usage
        if u.requests or u.cache_hits:
            return u.completion_tokens + u.cached_completion_tokens
        return int(sum(self.token_counts))


# The one serialization of a result: each field a door may write, and its value for a record that has no result.
# Each door (score --json, batch, eval, serve) selects its fields and adds its own keys (ids, labels, errors).
ROW_FIELDS: dict[str, tuple[Callable[[Result], Any], Any]] = {
    "prompt": (lambda r: r.prompt, None),
    "responses": (lambda r: r.responses, []),
    "token_counts": (lambda r: r.token_counts, []),
    "n_samples": (lambda r: len(r.responses), 0),
    "target_tokens": (lambda r: r.target_tokens, 0),
    "D": (lambda r: r.D.tolist(), None),
    "avg_wd": (lambda r: float(r.avg_wd), None),
    "eigen_wd": (lambda r: float(r.eigen_wd), None),
    "eigen_wd_fixed": (lambda r: r.eigen_wd_fixed, None),
    "answer_wd": (lambda r: r.answer_wd, None),
    "answer_error": (lambda r: r.answer_error, None),
    "sentences": (lambda r: sentence_dicts(r.sentences), None),
    "sentence_wd": (lambda r: r.sentence_wd, None),
    "claims": (lambda r: claim_dicts(r.claims), None),
    "answer_unigram": (lambda r: r.answer_unigram, None),
    "answer_nll": (lambda r: r.answer_nll, None),
    "cocoa": (lambda r: r.cocoa, None),
    "baselines": (lambda r: dict(r.baselines), {}),
    "lne_source": (lambda r: r.lne_source, None),
    "p_hallucination": (lambda r: r.p_hallucination, None),
    "flag": (lambda r: r.flag, None),
    "settled": (lambda r: r.settled, None),
    "stages": (lambda r: r.stages, None),
    "members": (lambda r: (r.calibration or {}).get("members"), None),
    "calibration": (lambda r: r.calibration, None),
    "settings": (lambda r: r.settings, None),
    "fingerprint": (lambda r: r.settings.get("fingerprint"), None),
    "usage": (lambda r: asdict(r.usage), None),
    "timings": (lambda r: r.timings, {}),
}
RESULT_FIELDS = tuple(f.name for f in fields(Result))


def result_row(result: Result | None, names: Sequence[str]) -> dict[str, Any]:
    """The JSON-ready values of ``names`` (keys of ROW_FIELDS) for a result; for None (a record that failed or did
    not parse) each field's empty value.

    Parameters
    ----------
    result : Result or None
    names : sequence of str
        The fields, in the order the row lists them.

    Returns
    -------
    dict
        ``{name: value}`` in the order of ``names``.
    """
    if result is None:
        return {name: ROW_FIELDS[name][1] for name in names}
    return {name: ROW_FIELDS[name][0](result) for name in names}


def token_floor(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> int:
    """Tokens a teacher pass runs for these pairs: each distinct prompt once, each distinct response of it once."""
    prompts = {tuple(p) for p, _ in pairs}
    responses = {(tuple(p), tuple(r)) for p, r in pairs}
    return sum(map(len, prompts)) + sum(len(r) for _, r in responses)


AUTO = "auto"  # the builder's calibration: the one shipped for the teacher, when it applies


@dataclass(frozen=True)
class Detector:
    """A run's wiring, built once and used by every door (``score``, ``batch``, ``eval``, ``serve``, Ray, Python).

    Parameters
    ----------
    teacher : HFTeacher or TeacherCard or None
        The model that forces the samples. A ``TeacherCard`` (tokenizer and shape, no weights) where only
        the CPU stage runs (Ray's driver and score tasks); None where nothing is reported (tests).
    sampler : object or None
        Draws the target's samples (``sampling.Sampler``, ``AsyncSampler`` or ``BatchSampler``);
        ``RecordedSamples`` for data that carries them; None where this process draws nothing (the
        reported sampler and endpoint then follow from the settings).
    settings : Settings
        The run's settings.
    calibration : Calibration or None
        Maps scores to a probability of hallucination and a flag; checked against the reported
        settings on creation (BBWDError unless fitted for them).
    cache : StateCache or None
        Teacher states kept on disk (``bbwd eval``); None: every response is forced.
    lne : bool, default=True
        Run the teacher's upper layers and output head for LNE where the target gave no log-probs of its
        own (``bbwd eval``); False: LNE only from the target's. ``from_settings`` defaults to False, so that
        ``score``, ``batch``, ``serve`` and the Python API stop the teacher at the layer.
    group_size : int
        Records per shared-prefix teacher pass in ``batch``, ``eval`` and Ray.
    device : str or None
        The resolved device; None: the teacher's own.
    calibration_note : str or None
        One line about the calibration, said once per run (fitted on other samples; none ships).

    ``reported`` (the typed reported settings with their fingerprint) is computed once, from the
    teacher's shape, the device and the sampler (or the settings where there is no sampler).
    """

    teacher: Any
    sampler: Any
    settings: Settings
    calibration: Calibration | None = None
    cache: StateCache | None = None
    lne: bool = True
    group_size: int = GROUP_SIZE
    device: str | None = None
    calibration_note: str | None = None

    def __post_init__(self) -> None:
        check_group_size(self.group_size)
        if self.calibration is not None:
            self.calibration.check(self.reported.as_dict())
            self.check_members(self.calibration)

    def computable(self) -> set[str]:
        """The members this run can give a result (``calibration.model.MEMBERS``); LNE only where log-probs come
        (a local llama.cpp sampler's, or the teacher's with ``lne``), EigenWD's fixed bandwidth only with a
        teacher that has one, the answer's members only for results with a judged answer, and of those
        ``answer_nll`` and ``cocoa`` only where the teacher runs its log-prob pass (``lne``)."""
        out = set(MEMBERS) - {"lne", "log_eigen_wd_fixed", *ANSWER_LOGPROB_MEMBERS}
        if self.reference_bandwidth is not None:
            out.add("log_eigen_wd_fixed")
        if self.lne or self.reported.sampler == "llama.cpp" or isinstance(self.sampler, RecordedSamples):
            out.add("lne")  # recorded samples may carry log-probs; a head without LNE serves those that do not
        if self.lne:
            out.update(ANSWER_LOGPROB_MEMBERS)
        return out

    def check_members(self, calibration: Calibration) -> None:
        """Raise BBWDError naming the members when no head of the calibration can be computed by this run."""
        can = self.computable()
        if not any(set(head.members) <= can for head in calibration.heads):
            missing = sorted({m for head in calibration.heads for m in head.members} - can)
            name = f"calibration {calibration.origin}" if calibration.origin else "the calibration"
            raise BBWDError(f"{name} needs members this run cannot compute: {', '.join(missing)}")

    @property
    def reference_bandwidth(self) -> float | None:
        """The teacher's fixed EigenWD bandwidth for the run's norm (``teachers.registry``), or None."""
        return reference_bandwidth(self.settings.teacher, self.settings.resolved_norm)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        calibration: Calibration | str | None = AUTO,
        *,
        recorded: bool = False,
        samples_from: str | None = None,
        weights: bool = True,
        sample: bool = True,
        lne: bool = False,
        cache: StateCache | None = None,
        group_size: int = GROUP_SIZE,
        cuda: bool | None = None,
        api: APIOptions | None = None,
    ) -> Detector:
        """The one builder: load the teacher and build the sampler the settings name, resolve the device, and
        choose the calibration.

        Parameters
        ----------
        settings : Settings
            What to run.
        calibration : Calibration, "auto" or None
            "auto": the calibration shipped for the teacher and the kind of run, when its meaning settings
            match (else none, with a note); None: no verdict.
        recorded : bool
            The samples come with the data (``RecordedSamples``): no target is reached, and the run reports
            ``target`` "recorded", no sampler and no sampling settings; ``score`` then takes the first K of the
            ``responses`` given (BBWDError for fewer, or none).
        samples_from : str or None
            With ``recorded``: who drew the samples (e.g. "gpt-4o-mini at T=1.0"), reported as ``samples_from``;
            not a score setting (the fingerprint leaves it out). BBWDError without ``recorded``.
        weights : bool
            Load the teacher's weights; False: its card only (a driver that scores states forced elsewhere).
        sample : bool
            Build the target's sampler; False where another process draws (Ray's teacher actors, API target).
        lne, cache, group_size
            As the fields of the same names.
        cuda : bool or None
            Whether a GPU is there for ``device="auto"``; None: this process's torch says.
        api : APIOptions or None
            An API target's options (``clients.api.api_options``: the API key as a value, record/replay, timeout,
            retries, cache folder, a shared request slot), read by another process (a Ray driver, for its actors);
            None: read from this process's environment when the sampler is built.

        Returns
        -------
        Detector
        """
        from blackbox_wd.clients import api_sampler_for, local_sampler_for, target_kind
        from blackbox_wd.teachers.card import load_card
        from blackbox_wd.teachers.hf import resolve_device

        if samples_from is not None and not recorded:
            raise BBWDError("samples_from says who drew recorded samples: it needs recorded=True")
        # a missing key fails before any model loads
        api_sampler = api_sampler_for(settings, api) if sample and not recorded else None
        if weights:
            teacher: Any = load_teacher(
                settings.teacher, settings.device, settings.dtype, settings.layer, settings.token_budget
            )
            device = str(teacher.device)
        else:
            teacher, device = load_card(settings.teacher, settings.layer), resolve_device(settings.device, cuda)
        sampler: Any = (
            RecordedSamples(samples_from)
            if recorded
            else api_sampler
            if api_sampler is not None
            else local_sampler_for(settings, teacher)
            if sample and weights and target_kind(settings) != "api"
            else None
        )
        built = cls(teacher, sampler, settings, None, cache, lne, group_size, device)
        return built.with_calibration(calibration)

    def with_calibration(self, calibration: Calibration | str | None) -> Detector:
        """The same wiring with another calibration: a file's (checked, with its sampling note), "auto" (the shipped
        one when it applies) or None (no verdict)."""
        from blackbox_wd.calibration import embedded_calibration

        chosen: Calibration | None
        if isinstance(calibration, str):
            if calibration != AUTO:
                raise BBWDError(f"calibration must be a Calibration, {AUTO!r} or None (got {calibration!r})")
            chosen, note = embedded_calibration(self.reported.as_dict())
        elif calibration is None:
            chosen, note = None, None
        else:
            chosen, note = calibration, calibration.sampling_note(self.reported.as_dict())
        notes = [note]
        if chosen is not None:
            chosen.check(self.reported.as_dict())  # a K below every fitted K is refused here, with its reason
            notes += [chosen.k_note(k) for k in self.settings.stages]
        if self.settings.stop is not None and (chosen is None or chosen.k != self.settings.k):
            why = "no calibration" if chosen is None else f"no stopping band for --k-max {self.settings.k}"
            how = f"it has bands for --k-max {chosen.k}" if chosen is not None and chosen.stages else ""
            notes.append(
                f"note: -k auto with {why}{': ' + how if how else ''}: no verdict can settle, so every prompt draws K"
            )
        return replace(self, calibration=chosen, calibration_note="; ".join(dict.fromkeys(filter(None, notes))) or None)

    @cached_property
    def reported(self) -> ReportedSettings:
        """The settings as run (resolved layer and projection, device, API endpoint host, local sampler)."""
        recorded = isinstance(self.sampler, RecordedSamples)
        samples_from = self.sampler.origin if isinstance(self.sampler, RecordedSamples) else None
        if self.sampler is not None:
            endpoint, drawn = endpoint_host(self.sampler), sampler_name(self.sampler)
        else:
            from blackbox_wd.clients import api_host, local_sampler_name

            endpoint, drawn = (
                api_host(self.settings),
                local_sampler_name(self.settings, self.resolved_device.split(":")[0]),
            )
        return ReportedSettings.of(
            self.settings,
            self.teacher,
            endpoint,
            self.resolved_device,
            recorded=recorded,
            sampler=drawn,
            samples_from=samples_from,
        )

    @property
    def resolved_device(self) -> str:
        """The device the teacher runs on."""
        return self.device if self.device is not None else str(self.teacher.device)

    @property
    def own_ids(self) -> bool:
        """True when the sampler shares the teacher's model, so that the samples' token ids are reused."""
        return shares_model(self.sampler, self.teacher)

    @property
    def fingerprint(self) -> str:
        """The fingerprint of the settings that change a prompt's score (``settings.fingerprint``)."""
        return self.reported.fingerprint

    def reported_settings(self, d: np.ndarray | None = None) -> dict[str, Any]:
        """The settings as run, as results carry them (with the fingerprint; D's bandwidth when given)."""
        out = self.reported.as_dict()
        if d is not None:
            out["bandwidth"] = median_bandwidth(d)
        return out

    def teacher_pass(
        self,
        items: Sequence[tuple[Messages, SampleSet]],
        *,
        logprobs: bool = False,
        failed: str = "scoring failed",
        cache: Any = None,
    ) -> list[PromptStates | BBWDError]:
        """One shared-prefix teacher pass over the items (``teacher_pass_isolated``); an exception of the pass
        becomes the error ``failed: ...`` of the item that raised it. ``cache``: where forced states are kept
        (``rounds.KeptStates``), else the wiring's."""
        return teacher_pass_isolated(
            self.teacher,
            items,
            own_ids=self.own_ids,
            logprobs=logprobs,
            failed=lambda exc: scoring_failed(exc, failed),
            cache=self.cache if cache is None else cache,
        )

    def score_states(self, ps: PromptStates, *, judge: Entails | None = exact_match_entails) -> Result:
        """The Result of one prompt's token states (``score_states``); raises on failure."""
        return score_states(ps, self, judge=judge)

    def outcome(
        self, ps: PromptStates | BBWDError, *, judge: Entails | None = exact_match_entails
    ) -> Result | BBWDError:
        """:meth:`score_states` with errors as values: a BBWDError as it is, anything else as ``scoring failed:
        ...``."""
        if isinstance(ps, BBWDError):
            return ps
        try:
            return self.score_states(ps, judge=judge)
        except BBWDError as exc:  # e.g. scores the calibration cannot map
            return exc
        except Exception as exc:  # noqa: BLE001 - this prompt's error; the others keep their results
            return scoring_failed(exc)

    def score_many(
        self, items: list[tuple[Messages, SampleSet]], judges: Sequence[Entails | None] | None = None
    ) -> list[Result | BBWDError]:
        """Score several prompts with one shared-prefix teacher pass over all their responses.

        A prompt whose input is unusable (fewer than 2 responses, an empty or over-long response),
        or whose part of the pass raised, gets its BBWDError in its slot; the others are scored
        (``score_states``: every signal, and the verdict). With ``lne`` the pass runs the full model where
        the target gave no log-probs; ``judges`` gives DSE's entailment judge of each prompt, None for no DSE
        (``judges`` None: equal normalised answers for every prompt). The timings hold ``baselines`` (LNE, LS,
        ES, ER) and ``dse`` apart.
        """
        passed = self.teacher_pass(items, logprobs=lne_logprobs(self.lne, [s for _, s in items]))
        return [
            self.outcome(ps, judge=exact_match_entails if judges is None else judges[n]) for n, ps in enumerate(passed)
        ]

    def score(
        self,
        prompt: str | Messages,
        responses: list[str] | None = None,
        answer: str | None = None,
        claims: Sequence[str] | None = None,
    ) -> Result:
        """Sample K responses (unless given), teacher-force them, and score; with ``answer`` (the answer to check)
        also its AnswerWD and its sentences' scores; with ``claims`` (statements about the answer) each claim's
        score, p and flag. Raises BBWDError when the prompt cannot be scored.

        On recorded samples (``from_settings(..., recorded=True)``) nothing is drawn: the first K ``responses``
        are scored, as ``batch`` and ``eval`` score a record's, and fewer than K (or none) raise BBWDError."""
        messages = as_messages(prompt)
        if isinstance(self.sampler, RecordedSamples):
            responses = self.sampler.first_k(responses, self.settings.k)
        if self.settings.stop is not None:
            return self.score_staged(messages, responses, answer, claims)
        t0 = time.perf_counter()
        sample_set = (
            SampleSet([Sample(r) for r in responses])
            if responses is not None
            else self.sampler.sample(messages, self.settings.sampling())
        )
        if answer is not None:
            sample_set.answer = Sample(answer)
        if claims is not None:
            sample_set.claims = tuple(claims)
        return self.score_samples(messages, sample_set, {"sample": time.perf_counter() - t0})

    def score_staged(
        self,
        messages: Messages,
        responses: list[str] | None = None,
        answer: str | None = None,
        claims: Sequence[str] | None = None,
    ) -> Result:
        """``-k auto``: the samples drawn (or given) in stages until the verdict is settled (``rounds``); raises
        BBWDError when the prompt cannot be scored."""
        import asyncio

        from blackbox_wd.rounds import sampler_draw, score_in_stages

        t0 = time.perf_counter()
        given = SampleSet(
            [Sample(r) for r in responses or []],
            answer=None if answer is None else Sample(answer),
            claims=None if claims is None else tuple(claims),
        )
        draw = sampler_draw(self.sampler) if responses is None else None
        result = asyncio.run(score_in_stages(self, [(messages, given)], draw))[0]
        if isinstance(result, BBWDError):
            raise result
        result.timings = {"total": time.perf_counter() - t0, **result.timings}
        return result

    def score_samples(
        self, messages: Messages, sample_set: SampleSet, timings: dict[str, float] | None = None
    ) -> Result:
        """Teacher-force and score samples that are already drawn; raises BBWDError when they cannot be scored."""
        result = self.score_many([(messages, sample_set)])[0]
        if isinstance(result, BBWDError):
            raise result
        result.timings = {**(timings or {}), **result.timings}
        return result


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
    teacher: HFTeacher, messages: Messages, samples: Sequence[Sample], own_ids: bool = False
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


def sample_ids(teacher: HFTeacher, sample: Sample, own_ids: bool = False) -> list[int]:
    """A sample's token ids: its own (``own_ids``, when it has them) or its text's."""
    return teacher.response_ids(sample.token_ids if own_ids and sample.token_ids is not None else sample.text)


def answer_pair(
    teacher: HFTeacher, prompt: list[int], answer: Sample, own_ids: bool = False
) -> tuple[list[int], list[int]]:
    """(prompt ids, the judged answer's ids), checked as the samples are; its errors name the judged answer."""
    pair = (prompt, sample_ids(teacher, answer, own_ids))
    teacher.check(0, *pair, name="judged answer")
    return pair


def teacher_pass(
    teacher: HFTeacher,
    items: Sequence[tuple[Messages, SampleSet]],
    *,
    logprobs: bool = False,
    own_ids: bool = False,
    cache: StateCache | None = None,
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
    teacher: HFTeacher,
    items: Sequence[tuple[Messages, SampleSet]],
    *,
    own_ids: bool,
    failed: Callable[[Exception], BBWDError],
    logprobs: bool = False,
    cache: StateCache | None = None,
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


def judged_answer_scores(
    ps: PromptStates, samples: list[np.ndarray], answer_states: np.ndarray | None
) -> tuple[float | None, list[SentenceScore] | None, float | None, float | None]:
    """AnswerWD of the judged answer, its sentences (each with its OT score and lexical surprise), their mean OT
    score and their mean surprise, all OT from one exact plan per sample (``transport.token_costs_to_each``);
    Nones without a forced answer. ``samples`` and ``answer_states`` are the states as transported."""
    if answer_states is None or ps.samples.answer is None:
        return None, None, None, None
    costs = token_costs_to_each(answer_states, samples)
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


def score_states(ps: PromptStates, detector: Detector, *, judge: Entails | None = exact_match_entails) -> Result:
    """Every signal of one prompt's token states, under the wiring's settings, and its verdict.

    D, AvgWD, EigenWD (the paper's per-prompt bandwidth) and EigenWD with the teacher's fixed bandwidth (when it
    has one); the baselines LS, ES, ER, DSE (with ``judge``, by default equal normalised answers) and LNE (from
    the target's log-probs, else from the teacher's when the pass computed them: ``Detector.lne``), timed apart;
    with a judged answer its AnswerWD, its sentences' OT scores and lexical surprises, and their means.

    With the wiring's calibration the result gets its probability of hallucination, flag and the members it
    rests on, and each sentence its own (with a sentence head); scores it cannot map raise BBWDError.
    """
    settings, calibration = detector.settings, detector.calibration
    alpha, p = settings.alpha, settings.p
    reported = detector.reported.as_dict()
    t0 = time.perf_counter()
    states = [transported(s.states, settings.resolved_norm) for s in ps.states]
    d = pairwise_w2(states)
    eig = eigen_wd(d, alpha, p)
    fixed = detector.reference_bandwidth
    answer_states = None if ps.answer is None else transported(ps.answer.states, settings.resolved_norm)
    answer, sentences, passage, lexical = judged_answer_scores(ps, states, answer_states)
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
        eigen_wd_fixed=None if fixed is None else eigen_wd(d, alpha, p, bandwidth=fixed),
        settings={**reported, "bandwidth": median_bandwidth(d)},
        usage=ps.samples.usage,
        timings=timings,
        answer_wd=answer,
        answer_error=ps.answer_error,
        sentences=sentences,
        sentence_wd=passage,
        answer_unigram=lexical,
    )
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
    result.baselines = compute_baselines(result.responses, logprobs=logprobs, embeddings=[s.last for s in ps.states])
    result.lne_source = "target" if target else "teacher" if teacher else None
    timings["baselines"] = time.perf_counter() - t1
    if judge is not None:
        t2 = time.perf_counter()
        result.baselines["dse"] = discrete_semantic_entropy(result.responses, judge)
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
