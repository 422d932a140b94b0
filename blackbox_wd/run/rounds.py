"""The rounds of ``-k auto`` over a group of prompts: draw, force, score, judge, and draw more where not settled.

:func:`score_in_rounds` is the one loop every door runs for an adaptive run (``score``, ``batch``, ``eval``,
``serve``, Ray's driver and the Python API). At round k (``Settings.rounds``: 3, 5, 10, ... up to K) each prompt
still open has its first k samples: those it came with, then samples drawn from the target, sample i always
being the same (``SamplingParams.start``). One shared-prefix teacher pass forces the samples not forced at an
earlier round (the states of those are kept: :class:`KeptStates`), and each prompt gets its scores and its
verdict with the round's heads (``Calibration.verdict(..., k=)``). A prompt whose verdict is settled
(``Calibration.settled``) stops there; the others go on. A run without a calibration cannot settle, and every
prompt goes to K.

Each result lists the rounds it was looked at (``Result.rounds``, a row's ``stages``: k, p, flag, whether settled
and the scores there), so a user sees why it stopped, and ``bbwd eval`` (``every_round``) scores every round of
every prompt to set the adaptive verdict beside the fixed-K one and to fit a calibration's rounds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

from blackbox_wd.clients.sampling import Draw, Sampler, draw_group
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Messages, SampleSet, SamplingParams, TokenStates
from blackbox_wd.run.result import ANSWER_SCORES, SAMPLE_SCORES, Result, Round, RowFields, result_row
from blackbox_wd.run.stages import PromptStates
from blackbox_wd.settings import Settings
from blackbox_wd.signals.baselines import Entails, exact_match_entails

if TYPE_CHECKING:
    from blackbox_wd.teachers.statecache import StateStore


class Wiring(Protocol):
    """What the loop needs of a ``detector.Detector`` (this module sits below the pipeline, which calls it)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def cache(self) -> StateStore | None: ...

    def forced(
        self,
        items: Sequence[tuple[Messages, SampleSet]],
        *,
        entails_each: Sequence[Entails | None] | None = None,
        cache: StateStore | None = None,
    ) -> list[PromptStates | Result | BBWDError]: ...

    def outcome(
        self, ps: PromptStates | Result | BBWDError, *, entails: Entails | None = ...
    ) -> Result | BBWDError: ...


# Scores prompts' samples as they are, each with its DSE entailment check: the teacher pass, OT, scores and verdict.
Score = Callable[[list[tuple[Messages, SampleSet]], list[Entails | None]], Awaitable[list[Result | BBWDError]]]


def sampler_draw(sampler: Sampler, executor: Executor | None = None) -> Draw:
    """The Draw of a sampler (``sampling.draw_group``: a batch call for a local target on ``executor``, concurrent
    API calls)."""

    async def draw(requests: list[tuple[Messages, int]], params: SamplingParams) -> list[SampleSet | BBWDError]:
        return [d.samples for d in await draw_group(sampler, requests, params, executor=executor)]

    return draw


def detector_score(detector: Wiring, kept: KeptStates) -> Score:
    """The Score of a detector in this process: one shared-prefix teacher pass over the prompts whose verdict reads
    the teacher (states kept in ``kept``; ``Detector.forced``), then each prompt's outcome, both off the event
    loop."""

    async def score(
        items: list[tuple[Messages, SampleSet]], entails_each: list[Entails | None]
    ) -> list[Result | BBWDError]:
        loop = asyncio.get_running_loop()
        passed = await loop.run_in_executor(
            None, partial(detector.forced, items, entails_each=entails_each, cache=kept)
        )
        return [
            await loop.run_in_executor(None, partial(detector.outcome, ps, entails=entails))
            for ps, entails in zip(passed, entails_each, strict=True)
        ]

    return score


class KeptStates:
    """The token states forced at earlier rounds, in memory (before an optional disk ``StateCache``)."""

    def __init__(self, inner: StateStore | None = None) -> None:
        self.inner = inner
        self.kept: dict[tuple[tuple[int, ...], tuple[int, ...], bool], TokenStates] = {}

    def get(self, prompt: Sequence[int], response: Sequence[int], logprobs: bool) -> TokenStates | None:
        """The states of a (prompt, response) pair forced before, or the inner cache's."""
        hit = self.kept.get((tuple(prompt), tuple(response), logprobs))
        if hit is None and self.inner is not None:
            hit = self.inner.get(prompt, response, logprobs)
        return hit

    def put(self, prompt: Sequence[int], response: Sequence[int], states: TokenStates) -> None:
        """Keep the states (and store them in the inner cache)."""
        self.kept[(tuple(prompt), tuple(response), states.logprobs is not None)] = states
        if self.inner is not None:
            self.inner.put(prompt, response, states)


ROUND_SCORES = RowFields(  # a round's scores (the baselines spread among them)
    (*SAMPLE_SCORES, *ANSWER_SCORES, "baselines"), spread=frozenset({"baselines"})
)


def round_entry(result: Result, settled: bool) -> Round:
    """What a result says of one round: k, its verdict, whether it settled, and its scores there (those a calibration
    reads: ``calibration.members.member_value`` of it gives each member).

    Parameters
    ----------
    result : Result
        The result at this round's samples.
    settled : bool
        Whether the loop stops at this round (settled, or the last).

    Returns
    -------
    Round
    """
    return Round(len(result.responses), result.p_hallucination, result.flag, settled, result_row(result, ROUND_SCORES))


def first_k(sample_set: SampleSet, k: int) -> SampleSet:
    """A prompt's first k samples, with its judged answer and the usage of all its draws."""
    return replace(sample_set, samples=sample_set.samples[:k])


async def draw_more(
    draw: Draw, todo: dict[int, tuple[Messages, int, int]], params: SamplingParams
) -> dict[int, SampleSet | BBWDError]:
    """Each prompt's (messages, samples drawn so far, samples wanted), drawn by ``start``: the prompts that
    start at the same sample go in one call."""
    out: dict[int, SampleSet | BBWDError] = {}
    by_start: dict[tuple[int, int], list[int]] = {}
    for n, (_, have, want) in todo.items():
        by_start.setdefault((have, want - have), []).append(n)
    for (start, count), ns in by_start.items():
        got = await draw([(todo[n][0], count) for n in ns], replace(params, k=count, start=start))
        out.update(zip(ns, got, strict=True))
    return out


async def score_in_rounds(
    detector: Wiring,
    items: Sequence[tuple[Messages, SampleSet]],
    draw: Draw | None = None,
    *,
    entails_each: Sequence[Entails | None] | None = None,
    every_round: bool = False,
    drawn: Sequence[int] | None = None,
    score: Score | None = None,
) -> list[Result | BBWDError]:
    """Score each prompt at the rounds of ``detector.settings`` until its verdict is settled.

    Parameters
    ----------
    detector : Wiring
        The wiring (a ``detector.Detector``); its settings' ``rounds`` and its calibration's rounds rule the loop.
    items : sequence of (messages, SampleSet)
        Each prompt with the samples it has (given responses, or all of them), its judged answer and usage.
    draw : Draw or None
        Draws more samples for a prompt short of a round's k; None: nothing is drawn (a prompt short of a round
        is scored on what it has, at its last round).
    entails_each : sequence of Entails or None, optional
        DSE's entailment check of each prompt (None: equal normalised answers).
    every_round : bool, default=False
        Score every round of every prompt (``bbwd eval``): the result is the last round's, its ``rounds`` say
        where the rule stopped.
    drawn : sequence of int, optional
        How many of each prompt's samples came from the target (the rest were given); by default, none.
    score : Score, optional
        How a round's samples are scored (the server's shared teacher batcher); by default
        :func:`detector_score`, which keeps the states forced at earlier rounds.

    Returns
    -------
    list of Result or BBWDError
        The result of the round each prompt stopped at (the last with ``every_round``), or its error.
    """
    ks = detector.settings.rounds
    pools = [s for _, s in items]
    from_target = list(drawn) if drawn is not None else [0] * len(items)
    given = [len(s.samples) - d for s, d in zip(pools, from_target, strict=True)]
    final: list[Result | BBWDError | None] = [None] * len(items)
    looked: list[list[Round]] = [[] for _ in items]
    score = score if score is not None else detector_score(detector, KeptStates(detector.cache))
    params = detector.settings.sampling()
    for s, k in enumerate(ks):
        last = s == len(ks) - 1
        open_ = [n for n in range(len(items)) if final[n] is None]
        if not open_:
            break
        if draw is not None:
            todo = {
                n: (items[n][0], len(pools[n].samples) - given[n], k - given[n])
                for n in open_
                if len(pools[n].samples) < k
            }
            for n, got in (await draw_more(draw, todo, params)).items() if todo else []:
                if isinstance(got, BBWDError):
                    final[n] = got
                    continue
                pools[n].samples.extend(got.samples)
                pools[n].usage.add(got.usage)
                pools[n].seconds += got.seconds
        ready = [n for n in open_ if final[n] is None]
        sets = [(items[n][0], first_k(pools[n], k)) for n in ready]
        scored = await score(sets, [exact_match_entails if entails_each is None else entails_each[n] for n in ready])
        for n, res in zip(ready, scored, strict=True):
            if isinstance(res, BBWDError):
                final[n] = res
                continue
            settled = last or bool(res.settled)
            looked[n].append(round_entry(res, settled))
            res.rounds = list(looked[n])
            if last or (settled and not every_round):
                final[n] = res
    return [r if r is not None else BBWDError("no round was scored") for r in final]
