"""The batch stages over one group of consecutive log records, shared by the local and the Ray engine.

A group goes: :func:`sample_group` (what each record needs, then the draw) -> :func:`teacher_group`
(one shared-prefix teacher pass) -> :func:`score_records` (exact OT, the scores, the verdict). Each takes and
gives one slot per record: a record that did not parse stays None, a record that cannot go on
carries its BBWDError, so that every input line ends as one output line. Groups are fixed by input
position (:func:`groups`), so that both engines, and a resumed run, batch exactly alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from blackbox_wd.clients.sampling import Drawn, Sampler, draw_group
from blackbox_wd.errors import BBWDError, SamplingError
from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams, Usage
from blackbox_wd.run.inputs import LogRecord, read_records
from blackbox_wd.run.result import Result
from blackbox_wd.run.rounds import sampler_draw, score_in_rounds
from blackbox_wd.run.stages import PromptStates
from blackbox_wd.signals.decompose import list_claims

if TYPE_CHECKING:
    from blackbox_wd.run.detector import Detector

T = TypeVar("T")
Slot = Any  # one record's value at a stage: None (did not parse), a BBWDError, or the stage's output


class Prompter(Protocol):
    """A teacher as far as checking a prompt goes (HFTeacher, or a TeacherCard without weights): its
    ``prompt_ids`` raise BBWDError for messages its template rejects or a prompt that fills its context."""

    def prompt_ids(self, messages: Messages) -> list[int]: ...


def select_records(src: Path, skip: int = 0, lines: frozenset[int] | None = None) -> Iterator[LogRecord]:
    """The records of ``src`` after its first ``skip`` lines, only those of ``lines`` when given."""
    return (rec for rec in read_records(src, skip) if lines is None or rec.line in lines)


def groups(records: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive groups of ``size`` records (or of anything)."""
    records = iter(records)
    while group := list(islice(records, size)):
        yield group


def record_need(rec: LogRecord, teacher: Prompter, k: int, sample_missing: bool) -> int | BBWDError | None:
    """How many responses to draw for a record, why it cannot be scored, or None when it did not parse."""
    if rec.error:
        return None
    assert rec.messages is not None, "a record that parsed has its messages"
    try:
        teacher.prompt_ids(rec.messages)  # caught before any sampling
    except BBWDError as exc:  # the chat template rejects the messages, or the prompt is over the context
        return BBWDError(f"field '{rec.prompt_field}': {exc}")
    given = min(len(rec.responses), k)
    if not sample_missing and given < k:
        return BBWDError(
            f"field 'responses' has {len(rec.responses)} response(s); every record of this run is "
            f"scored on K={k} and there is no --target to sample more"
        )
    return k - given


async def sample_group(
    group: list[LogRecord],
    teacher: Prompter,
    sampler: Sampler | None,
    params: SamplingParams,
    sample_missing: bool,
    draw: bool = True,
    ask_claims: bool = False,
) -> list[SampleSet | BBWDError | None]:
    """Each record's given responses (the first K) topped up to K from the target (``sampling.draw_group``:
    one batched draw for a local target, concurrent API calls else); ``draw`` False: the given responses only
    (``-k auto`` draws in its rounds: ``rounds``). With ``ask_claims`` (``Settings.claims`` "target"), the
    target lists the claims of each judged answer that came without claims (``decompose.list_claims``, one
    request per answer, its cost in the record's usage); a failed request is the record's error, as a failed
    draw is."""
    needs = [record_need(rec, teacher, params.k, sample_missing) for rec in group]
    ask = [
        n
        for n, (rec, need) in enumerate(zip(group, needs, strict=True))
        if ask_claims and isinstance(need, int) and rec.response is not None and rec.claims is None
    ]
    listed: dict[int, tuple[tuple[str, ...], Usage] | BBWDError] = {}
    if ask:
        assert sampler is not None, "claims are listed only with a target, whose sampler is given"
        answers = [a for n in ask if (a := group[n].response) is not None]
        listed = dict(zip(ask, await list_claims(sampler_draw(sampler), answers, params.seed), strict=True))
    todo: dict[int, tuple[Messages, int]] = {}  # by position: what to draw for each record short of K
    for n, (rec, need) in enumerate(zip(group, needs, strict=True)):
        if draw and isinstance(need, int) and need > 0:
            assert rec.messages is not None, "record_need counts responses only for a record that parsed"
            todo[n] = (rec.messages, need)
    drawn: dict[int, Drawn] = {}
    if todo:
        assert sampler is not None, "responses are drawn only with a target (sample_missing), whose sampler is given"
        drawn = dict(zip(todo, await draw_group(sampler, list(todo.values()), params), strict=True))
    out: list[SampleSet | BBWDError | None] = []
    for n, (rec, need) in enumerate(zip(group, needs, strict=True)):
        if need is None or isinstance(need, BBWDError):
            out.append(need)
            continue
        got = drawn[n].samples if n in drawn else SampleSet([])
        claims = listed.get(n)
        if isinstance(claims, BBWDError):  # transient as the failure was (a resumed batch asks again)
            got = SamplingError(f"listing the answer's claims: {claims}", transient=claims.transient)
        if isinstance(got, SampleSet):
            got.samples[:0] = [Sample(r) for r in rec.responses[: params.k]]
            got.answer = Sample(rec.response) if rec.response is not None else None  # for AnswerWD and its sentences
            got.answer_sentences = rec.sentences
            got.claims = rec.claims
            if isinstance(claims, tuple):
                got.claims, cost = claims
                got.usage.add(cost)
        out.append(got)
    return out


async def detector_samples(
    detector: Detector, group: list[LogRecord], sample_missing: bool, draw: bool = True
) -> list[SampleSet | BBWDError | None]:
    """:func:`sample_group` with a detector's teacher, sampler and settings (its sampling, and whether the target
    lists the answers' claims): what both engines call."""
    settings = detector.settings
    return await sample_group(
        group,
        detector.teacher,
        detector.sampler,
        settings.sampling(),
        sample_missing,
        draw=draw,
        ask_claims=settings.claims is not None,
    )


def ready_items(group: list[LogRecord], sets: list[Slot]) -> tuple[list[int], list[tuple[Messages, SampleSet]]]:
    """The positions of the group's records that have samples, and their (messages, samples)."""
    ready = [n for n, s in enumerate(sets) if isinstance(s, SampleSet)]
    items: list[tuple[Messages, SampleSet]] = []
    for n in ready:
        messages = group[n].messages
        assert messages is not None, "a record with samples parsed"
        items.append((messages, sets[n]))
    return ready, items


def teacher_group(
    detector: Detector, group: list[LogRecord], sets: list[Slot]
) -> list[PromptStates | Result | BBWDError | None]:
    """One shared-prefix teacher pass over the group's records that have samples and whose verdict reads the teacher
    (``Detector.forced``); the others judged from their texts, a Result already."""
    ready, items = ready_items(group, sets)
    passed = detector.forced(items)
    out: list[PromptStates | Result | BBWDError | None] = list(sets)  # errors and None pass through
    for n, ps in zip(ready, passed, strict=True):
        out[n] = ps
    return out


async def score_group_in_rounds(
    detector: Detector, group: list[LogRecord], sets: list[Slot], sampler: Sampler | None
) -> list[Result | BBWDError | None]:
    """``-k auto`` over the group's records that have their given responses (``rounds.score_in_rounds``): each drawn
    from ``sampler`` (when there is a target) in rounds until its verdict is settled; errors and None pass through."""
    ready, items = ready_items(group, sets)
    draw = sampler_draw(sampler) if sampler is not None else None
    scored = await score_in_rounds(detector, items, draw) if items else []
    out: list[Result | BBWDError | None] = list(sets)
    for n, res in zip(ready, scored, strict=True):
        if isinstance(res, Result):
            res.timings = {"sample": sets[n].seconds, **res.timings}
        out[n] = res
    return out


def score_records(detector: Detector, states: list[Slot], sets: list[Slot]) -> list[Result | BBWDError | None]:
    """D, the scores and the verdict of each record that has token states (``Detector.outcome``; one judged from its
    texts is a Result already); its sampling time joins the timings."""
    out: list[Result | BBWDError | None] = []
    for ps, sset in zip(states, sets, strict=True):
        res = detector.outcome(ps) if isinstance(ps, PromptStates) else ps
        if isinstance(res, Result):
            res.timings = {"sample": sset.seconds, **res.timings}
        out.append(res)
    return out
