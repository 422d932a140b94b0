"""A run's wiring: :class:`Detector`, built once by :meth:`Detector.from_settings` (its parts: ``build``), runs
the stages of :mod:`blackbox_wd.run.stages` for every door: ``score``, ``batch``'s local and Ray engines, ``eval``,
the server and the Python API; with ``-k auto`` in rounds (:mod:`blackbox_wd.run.rounds`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.choice import AUTO, check_members, choose_calibration, computable_members
from blackbox_wd.clients.sampling import RecordedSamples, Sampler, shares_model
from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.transport import REPLICATE_MAX
from blackbox_wd.records import Messages, Sample, SampleSet, Usage, as_messages
from blackbox_wd.run import stages as scoring
from blackbox_wd.run.build import TeacherLoader, build_parts, settings_as_run
from blackbox_wd.run.result import Result
from blackbox_wd.run.rounds import sampler_draw, score_in_rounds
from blackbox_wd.run.stages import PromptStates, lne_logprobs, scoring_failed
from blackbox_wd.run.texts import texts_or_teacher
from blackbox_wd.settings import GROUP_SIZE, ReportedSettings, Settings, check_group_size
from blackbox_wd.signals.baselines import Entails, exact_match_entails
from blackbox_wd.signals.decompose import decompose
from blackbox_wd.teachers.card import TeacherCard
from blackbox_wd.teachers.hf import placement
from blackbox_wd.teachers.registry import reference_bandwidth
from blackbox_wd.teachers.teacher import Teacher

if TYPE_CHECKING:
    from blackbox_wd.clients.api import APIOptions
    from blackbox_wd.teachers.statecache import StateCache, StateStore


@dataclass(frozen=True)
class Detector:
    """A run's wiring, built once and used by every door (``score``, ``batch``, ``eval``, ``serve``, Ray, Python).

    Parameters
    ----------
    teacher : Teacher or TeacherCard
        The model that forces the samples. A ``TeacherCard`` (tokenizer and shape, no weights) where only
        the CPU stage runs (Ray's driver and score tasks).
    sampler : Sampler or None
        Draws the target's samples (``sampling.Sampler``: an ``AsyncSampler``, a ``BatchSampler`` or any other);
        ``RecordedSamples`` for data that carries them; None where this process draws nothing (the
        reported sampler and endpoint then follow from the settings).
    settings : Settings
        The run's settings.
    calibration : Calibration or None
        Maps scores to a probability of hallucination and a flag; checked against the reported
        settings on creation (BBWDError unless fitted for them).
    cache : StateCache or None
        Teacher states kept on disk (``bbwd eval``); None: every response is forced.
    lne : bool, default=False
        Run the teacher's upper layers and output head for LNE where the target gave no log-probs of its
        own (``bbwd eval``); False: LNE only from the target's, and the teacher stops at the layer (``score``,
        ``batch``, ``serve``, the Python API).
    group_size : int
        Records per shared-prefix teacher pass in ``batch``, ``eval`` and Ray.
    device : str or None
        The resolved device; None: the teacher's own.
    calibration_note : str or None
        One line about the calibration, said once per run (fitted on other samples; none ships).
    all_scores : bool, default=False
        Force every prompt through the teacher and give every score (D, AvgWD, EigenWD, ...), whatever its verdict
        reads; False: only the prompts whose verdict reads a teacher member (``texts.reads_teacher``), the others
        judged from their texts with the same p and flag, their teacher's fields None.
    loader : TeacherLoader or None
        The teacher's weights, loaded when a prompt first needs them (``teacher`` is then its card).
    reported_as : ReportedSettings or None
        The settings as run, resolved in another process (a Ray driver's, where the API key is, for its teacher
        actors' results judged from their texts); None: resolved here (``reported``).
    one_prompt : bool, default=False
        A run of one prompt (``bbwd score``), where start-up outweighs throughput: its bundled Llama teacher is
        forced in numpy (``hf.placement``) and its small unequal pairs of states are solved without POT
        (``transport.REPLICATE_MAX``), so that it imports no torch.

    ``reported`` (the typed reported settings with their fingerprint) is computed once, from the
    teacher's shape, the device and the sampler (or the settings where there is no sampler).
    """

    teacher: Teacher | TeacherCard
    sampler: Sampler | None
    settings: Settings
    calibration: Calibration | None = None
    cache: StateCache | None = None
    lne: bool = False
    group_size: int = GROUP_SIZE
    device: str | None = None
    calibration_note: str | None = None
    all_scores: bool = False
    loader: TeacherLoader | None = None
    reported_as: ReportedSettings | None = None
    one_prompt: bool = False

    def __post_init__(self) -> None:
        check_group_size(self.group_size)
        if self.calibration is not None:
            self.calibration.check(self.reported.as_dict())
            check_members(self.calibration, self.computable())

    def computable(self) -> set[str]:
        """The members this run can give a result (``choice.computable_members``): LNE where log-probs come (a
        local llama.cpp sampler's, recorded samples', or the teacher's with ``lne``), EigenWD's fixed bandwidth with
        a teacher that has one, ``answer_nll`` and ``cocoa`` with ``lne``."""
        return computable_members(
            lne=self.lne,
            fixed_bandwidth=self.reference_bandwidth is not None,
            target_logprobs=self.reported.sampler == "llama.cpp" or isinstance(self.sampler, RecordedSamples),
        )

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
        all_scores: bool = False,
        one_prompt: bool = False,
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
            Without weights: whether a GPU is there for ``device="auto"``; None: this process's torch says.
        api : APIOptions or None
            An API target's options (``clients.api.api_options``: the API key as a value, record/replay, timeout,
            retries, cache folder, a shared request slot), read by another process (a Ray driver, for its actors);
            None: read from this process's environment when the sampler is built.
        all_scores : bool
            As the field: True computes every score of every prompt, and loads the teacher now; False loads it when
            a prompt first needs it (where no local target samples on it).
        one_prompt : bool
            The run scores one prompt (``bbwd score``), where start-up outweighs throughput: on CPU in float32 a
            bundled Llama teacher is forced in numpy (``hf.placement``), sparing the import of torch.

        Returns
        -------
        Detector
        """
        place = placement(settings.device, settings.dtype, None if weights else cuda, one_prompt=one_prompt)
        teacher, sampler, device, loader = build_parts(
            settings,
            recorded=recorded,
            samples_from=samples_from,
            weights=weights,
            sample=sample,
            place=place,
            api=api,
            when_needed=not all_scores,
        )
        built = cls(
            teacher, sampler, settings, None, cache, lne, group_size, device, None, all_scores, loader, None, one_prompt
        )
        return built.with_calibration(calibration)

    def with_calibration(self, calibration: Calibration | str | None) -> Detector:
        """The same wiring with another calibration: a file's, "auto" or None (``choice.choose_calibration``)."""
        reported = self.reported.as_dict() if calibration is not None else {}  # None: none read (a Ray actor's)
        chosen, note = choose_calibration(calibration, reported, self.settings)
        return replace(self, calibration=chosen, calibration_note=note)

    def deciding_as(self, driver: Detector) -> Detector:
        """This detector with the ``driver``'s calibration and settings as run: what decides which prompts it forces
        (``forced``), as the driver decides (a Ray teacher actor's, whose own build reads no calibration)."""
        return replace(self, calibration=driver.calibration, reported_as=driver.reported)

    @cached_property
    def reported(self) -> ReportedSettings:
        """The settings as run (``build.settings_as_run``: resolved layer and projection, device, API endpoint host,
        local sampler); ``reported_as`` where given."""
        if self.reported_as is not None:
            return self.reported_as
        return settings_as_run(self.settings, self.teacher, self.sampler, self.resolved_device)

    @property
    def resolved_device(self) -> str:
        """The device the teacher runs on."""
        if self.device is not None:
            return self.device
        assert isinstance(self.teacher, Teacher), "a teacher's card is built with its resolved device"
        return str(self.teacher.device)

    @property
    def drawing_sampler(self) -> Sampler:
        """The sampler, where this process draws; BBWDError where it draws nothing (a Ray driver's detector)."""
        if self.sampler is None:
            raise BBWDError("this detector draws nothing: build it with its sampler (from_settings, sample=True)")
        return self.sampler

    @property
    def own_ids(self) -> bool:
        """True when the sampler shares the teacher's model, so that the samples' token ids are reused."""
        return shares_model(self.sampler, self.teacher)

    @property
    def fingerprint(self) -> str:
        """The fingerprint of the settings that change a prompt's score (``settings.fingerprint``)."""
        return self.reported.fingerprint

    def reported_settings(self) -> dict[str, Any]:
        """The settings as run, as results carry them (with the fingerprint)."""
        return self.reported.as_dict()

    def teacher_pass(
        self,
        items: Sequence[tuple[Messages, SampleSet]],
        *,
        logprobs: bool = False,
        failed: str = "scoring failed",
        cache: StateStore | None = None,
    ) -> list[PromptStates | BBWDError]:
        """One shared-prefix teacher pass over the items (``teacher_pass_isolated``); an exception of the pass
        becomes the error ``failed: ...`` of the item that raised it. ``cache``: where forced states are kept
        (``rounds.KeptStates``), else the wiring's."""
        return scoring.teacher_pass_isolated(
            self.forcing_teacher,
            items,
            own_ids=self.own_ids,
            logprobs=logprobs,
            failed=lambda exc: scoring_failed(exc, failed),
            cache=self.cache if cache is None else cache,
        )

    @property
    def forcing_teacher(self) -> Teacher:
        """The teacher with its weights: loaded now where they wait (``loader``); BBWDError for a card alone."""
        if isinstance(self.teacher, Teacher):
            return self.teacher
        if self.loader is None:
            raise BBWDError("a teacher's card forces nothing: build the detector with the teacher's weights")
        return self.loader.teacher()

    def forced(
        self,
        items: Sequence[tuple[Messages, SampleSet]],
        *,
        entails_each: Sequence[Entails | None] | None = None,
        logprobs: bool = False,
        failed: str = "scoring failed",
        cache: StateStore | None = None,
    ) -> list[PromptStates | Result | BBWDError]:
        """Each item's token states where its verdict reads the teacher (one shared-prefix :meth:`teacher_pass` over
        them, the teacher loaded when first needed); else its result judged from its texts (``texts.texts_or_teacher``),
        or the error its samples would get in the pass. With ``all_scores`` those judged from their texts are forced
        too, in a pass of their own after the first: the first pass holds the same prompts either way, so that their
        states, and p, are the same to the bit (a pass's batch shapes round its floats).
        ``entails_each``: DSE's entailment check of each (None: equal normalised answers); ``logprobs``, ``failed``,
        ``cache``: the pass's."""
        checks: list[Entails | None] = (
            list(entails_each) if entails_each is not None else [exact_match_entails] * len(items)
        )
        out: list[PromptStates | Result | BBWDError | None] = list(
            texts_or_teacher(
                self.teacher,
                list(items),
                self.settings,
                self.reported.as_dict(),
                self.calibration,
                own_ids=self.own_ids,
                entails_each=checks,
                verdicts=not self.all_scores,
            )
        )
        need = [n for n, got in enumerate(out) if got is None]
        rest = [n for n, got in enumerate(out) if isinstance(got, Result)] if self.all_scores else []
        for part in (need, rest):
            if part:
                passed = self.teacher_pass([items[n] for n in part], logprobs=logprobs, failed=failed, cache=cache)
                for n, ps in zip(part, passed, strict=True):
                    out[n] = ps
        return out  # type: ignore[return-value]  # every None filled by the pass

    def outcome(
        self, ps: PromptStates | Result | BBWDError, *, entails: Entails | None = exact_match_entails
    ) -> Result | BBWDError:
        """``stages.score_states`` with errors as values (``stages.score_states_isolated``); a result judged from the
        texts (``forced``) as it is."""
        if isinstance(ps, Result):
            return ps
        return scoring.score_states_isolated(
            ps,
            self.settings,
            self.reported.as_dict(),
            self.calibration,
            self.reference_bandwidth,
            entails=entails,
            replicate=REPLICATE_MAX if self.one_prompt else 0,  # no POT, so no torch, in a one-prompt run
        )

    def score_many(
        self, items: list[tuple[Messages, SampleSet]], entails_each: Sequence[Entails | None] | None = None
    ) -> list[Result | BBWDError]:
        """Score several prompts with one shared-prefix teacher pass over all their responses.

        A prompt whose input is unusable (fewer than 2 responses, an empty or over-long response),
        or whose part of the pass raised, gets its BBWDError in its slot; the others are scored
        (``score_states``: every signal, and the verdict). With ``lne`` the pass runs the full model where
        the target gave no log-probs; ``entails_each`` gives DSE's entailment check of each prompt, None for no DSE
        (``entails_each`` None: equal normalised answers for every prompt). The timings hold ``baselines`` (LNE, LS,
        ES, ER) and ``dse`` apart.
        """
        passed = self.forced(items, entails_each=entails_each, logprobs=lne_logprobs(self.lne, [s for _, s in items]))
        return [
            self.outcome(ps, entails=exact_match_entails if entails_each is None else entails_each[n])
            for n, ps in enumerate(passed)
        ]

    def score(
        self,
        prompt: str | Messages,
        responses: list[str] | None = None,
        answer: str | None = None,
        claims: Sequence[str] | None = None,
    ) -> Result:
        """Sample K responses (unless given), teacher-force them, and score; with ``answer`` (the answer to check)
        also its AnswerWD and its sentences' scores; with ``claims`` (statements about the answer), or with the
        setting ``claims`` "target" the claims the target lists (``decompose``), each claim's score, p and flag;
        with ``-k auto``, in rounds until the verdict is settled (``rounds``). Raises BBWDError when the prompt
        cannot be scored.

        On recorded samples (``from_settings(..., recorded=True)``) nothing is drawn: the first K ``responses``
        are scored, as ``batch`` and ``eval`` score a record's, and fewer than K (or none) raise BBWDError."""
        messages = as_messages(prompt)
        if isinstance(self.sampler, RecordedSamples):
            responses = self.sampler.first_k(responses, self.settings.k)
        t0 = time.perf_counter()
        listing = Usage()
        if claims is None and answer is not None and self.settings.claims is not None:
            claims, listing = decompose(self.drawing_sampler, answer, self.settings.seed)
        given = SampleSet(
            [Sample(r) for r in responses or []],
            answer=None if answer is None else Sample(answer),
            claims=None if claims is None else tuple(claims),
        )
        if self.settings.stop is not None:
            draw = sampler_draw(self.drawing_sampler) if responses is None else None
            adaptive = asyncio.run(score_in_rounds(self, [(messages, given)], draw))[0]
            if isinstance(adaptive, BBWDError):
                raise adaptive
            adaptive.timings = {"total": time.perf_counter() - t0, **adaptive.timings}
            adaptive.usage.add(listing)
            return adaptive
        if responses is None:
            drawn = self.drawing_sampler.sample(messages, self.settings.sampling())
            given = replace(drawn, answer=given.answer, claims=given.claims)
        result = self.score_samples(messages, given, {"sample": time.perf_counter() - t0})
        result.usage.add(listing)  # the request that listed the claims is part of what the verdict cost
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
