"""The evaluation run: score dataset prompts with AvgWD, EigenWD and the baselines, then label them.

Per prompt: the K samples that every detector scores and, with ``label_from="greedy"`` (default),
one more answer at temperature 0 through the same sampler: the answer a user would be shown, which
the label judges (as INSIDE and LM-Polygraph do). With ``label_from="first"`` the first sample is
the judged answer. Labels, 1 = hallucination (``eval.labels``): ``label`` / ``label_em`` of the
judged answer; with greedy also ``label_first`` / ``label_em_first`` of the first sample.

DSE clusters the K samples with the entailment check ``dse`` names: ``answer`` (QA: equal ``em_key``, the
exact-match normalisation; MATH: equivalent final answers; passages: not computed, since no two
passages are equal answers), ``nli`` (an NLI model), ``teacher`` (the teacher LM's yes/no logits) or
``none``.

Recorded data (``Dataset.recorded``: records that carry their ``samples``) is scored as it is: the
first K samples of each record, no sampler is called, the judged answer is the record's
``response`` (else its first sample) and the labels are the file's (``label``, ``human_score``,
``sentence_labels``). A record's ``sentences`` are the judged answer's sentences the detector scores
(``SampleSet.answer_sentences``), so that they align with its labels. Every row carries ``answer_wd``,
AnswerWD of the judged answer, when that answer is not one of the samples (``--label-from first`` has
none), and its ``sentences`` ({"text", "start", "end", "score"} each) with their mean, ``sentence_wd``.

Items go in groups of the wiring's ``group_size`` (``groups.groups``, as batch forms them), fixed by the
dataset's order, each drawn by the sampling stage batch uses (``sampling.draw_group``) and scored with
one shared-prefix teacher pass. Rows go to results.jsonl through the run log batch uses
(``runlog.RunLog``: appended, flushed and fsynced), each with the verdict when the wiring has a
calibration. The fingerprint covers the detector's settings and the protocol (prompts, exemplar ids,
label source, DSE entailment); a rerun resumes through the driver batch uses (``runlog.Resume``, keyed by
item id): it keeps the rows of the same fingerprint, calibration and input (``eval_resume``),
recomputes the rows whose error was transient in place and computes the rest, an unfinished group
again from its start, so that it ends with the rows of an uninterrupted run. ``settings.json`` beside
results.jsonl holds the reported settings (and protocol) the rows' fingerprint is computed from,
for ``bbwd calibrate``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from blackbox_wd.clients.sampling import Drawn, draw_group
from blackbox_wd.doors.eval.data import Dataset, Item
from blackbox_wd.doors.eval.labeller import LLMLabeller
from blackbox_wd.doors.eval.labels import prompt_labels
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Sample, SampleSet, SamplingParams
from blackbox_wd.run.detector import Detector
from blackbox_wd.run.groups import groups
from blackbox_wd.run.result import ANSWER_SCORES, SAMPLE_SCORES, Result, RowFields, result_row
from blackbox_wd.run.rounds import score_in_rounds
from blackbox_wd.run.runlog import Emit, Resume, RunLog
from blackbox_wd.settings import RECORDED, fingerprint
from blackbox_wd.signals.baselines import Entails, exact_match_entails
from blackbox_wd.signals.baselines.entailment import TeacherEntailment, final_answer_entails
from blackbox_wd.signals.baselines.nli import NLIEntailment, NLIModel

LABEL_SOURCES = ("greedy", "first")
DSE_CHOICES = ("answer", "nli", "teacher", "none")
MAX_TOKENS = {"qa": 128, "math": 512}  # default --max-tokens: the largest over the kinds in the data


def default_max_tokens(items: Sequence[Item]) -> int:
    """MAX_TOKENS of the data's kinds (room for a \\boxed{} answer when MATH items are present)."""
    return max((MAX_TOKENS.get(it.kind, MAX_TOKENS["qa"]) for it in items), default=MAX_TOKENS["qa"])


def protocol(dataset: Dataset, label_from: str, dse: str, nli: str | None = None, lne: bool = True) -> dict[str, Any]:
    """What changes a row beyond the detector's settings: prompts and exemplars, label source, DSE entailment,
    and LNE when it is not run."""
    if dataset.recorded:
        label_from = RECORDED  # the record's response is judged, with the file's labels
    elif label_from not in LABEL_SOURCES:
        raise BBWDError(f"unknown label source '{label_from}': use one of {', '.join(LABEL_SOURCES)}")
    if dse not in DSE_CHOICES:
        raise BBWDError(f"unknown DSE judge '{dse}': use one of {', '.join(DSE_CHOICES)}")
    if (dse == "nli") != (nli is not None):
        raise BBWDError("--dse nli needs --nli MODEL, and --nli is used only with --dse nli")
    return {
        **dataset.described(),
        "label_from": label_from,
        "dse": f"nli:{nli}" if nli else dse,
        **({} if lne else {"lne": "off"}),
    }


def run_fingerprint(detector: Detector, described: dict[str, Any]) -> str:
    """The fingerprint of every row: the detector's settings plus the protocol."""
    return fingerprint({**detector.reported_settings(), "protocol": described})


def dse_entails(item: Item, dse: str, detector: Detector, nli: NLIModel | None = None) -> tuple[Entails | None, str]:
    """The entailment check DSE clusters this item's samples with, and its name in the row."""
    if dse == "answer":
        if item.kind == "passage":  # no two passages are the same answer: answer equivalence does not apply
            return None, "none (passage)"
        return (final_answer_entails, "final-answer") if item.kind == "math" else (exact_match_entails, "answer")
    if dse == "nli":
        assert nli is not None, "protocol() refuses --dse nli without --nli MODEL"
        return NLIEntailment(nli), f"nli:{nli.name}"
    if dse == "teacher":
        return TeacherEntailment(detector.teacher, item.question), f"teacher:{detector.settings.teacher}"
    return None, "none"


def greedy_params(detector: Detector) -> SamplingParams:
    """One answer at temperature 0 with the run's max tokens and seed."""
    s = detector.settings
    return SamplingParams(k=1, temperature=0.0, top_p=1.0, max_tokens=s.max_tokens, seed=s.seed)


EVAL_FIELDS = RowFields(  # the result's fields of a results.jsonl row (``result.result_row``)
    (
        "responses",
        "n_samples",
        "target_tokens",
        "token_counts",
        *SAMPLE_SCORES,
        "answer_error",
        "sentences",
        "claims",
        *ANSWER_SCORES,
        "lne_source",
        "p_hallucination",
        "flag",
        "members",
        "stages",
        "D",
        "timings",
        "baselines",
    ),
    optional=frozenset({"answer_error", "p_hallucination", "flag", "members", "stages"}),
    spread=frozenset({"baselines"}),  # a column each
)


def eval_row(item: Item, result: Result, extra: dict[str, Any], calibration: str | None = None) -> dict[str, Any]:
    """The results.jsonl object of one prompt: the item, ``extra`` (labels, judged answer), then the result's
    EVAL_FIELDS (a column per baseline; answer_error, the verdict and stages only when they have a value)."""
    row = result_row(result, EVAL_FIELDS)
    return {
        "id": item.id,
        "source": item.source,
        "kind": item.kind,
        "style": item.style,
        "question": item.question,
        "answers": item.answers,
        **extra,
        **row,
        **({"calibration": calibration} if calibration else {}),
    }


def eval_log(path: Path) -> RunLog:
    """The run log of results.jsonl: each line a row with an id, the fingerprint and its input's hash."""
    return RunLog(path, "eval", "a bbwd eval row", lambda n, row: {"id", "fingerprint", "input_hash"} <= row.keys())


def eval_resume(path: Path, fingerprint: str, hashes: dict[str, str], calibration: str | None = None) -> Resume:
    """The resume of results.jsonl (``runlog.Resume``, keyed by item id): its earlier rows, checked against this
    run's fingerprint, calibration id and input.

    Parameters
    ----------
    path : Path
        results.jsonl.
    fingerprint : str
        This run's (``run_fingerprint``).
    hashes : dict
        Every item id of the data file to its line's hash.
    calibration : str or None
        The id of the wiring's calibration.

    Returns
    -------
    Resume
        A torn last line is cut off; a file that is not bbwd eval output, or comes from other settings, another
        calibration or another input, is refused (BBWDError) and left as it is.
    """
    log = eval_log(path)

    def check(rows: list[dict[str, Any]]) -> None:
        log.check_settings(rows, fingerprint, calibration)
        other = RunLog.other_input(rows, "id", hashes)
        if other is not None:
            n, row = other
            raise BBWDError(f"{path} line {n} (id {row['id']}) comes from another input: use another -o")

    return Resume(log, "id", check)


def done_rows(
    path: Path, fingerprint: str, hashes: dict[str, str], calibration: str | None = None
) -> list[dict[str, Any]]:
    """Rows of an earlier run, checked against this run's fingerprint, calibration id and input (``eval_resume``).

    ``hashes`` maps every item id of the data file to its line's hash. A torn last line is cut off;
    a file that is not bbwd eval output, or comes from other settings, another calibration or another
    input, is refused and left as it is.
    """
    return eval_resume(path, fingerprint, hashes, calibration).rows


def recorded_draw(item: Item, k: int) -> Drawn:
    """A recorded item's first K samples and its response as the judged answer, with the record's sentences
    of it: a draw that drew nothing."""
    if len(item.samples) < k:
        return Drawn(
            BBWDError(
                f"field 'samples' has {len(item.samples)} sample(s); every record of this run is scored on K={k} (-k)"
            )
        )
    answer = Sample(item.response) if item.response is not None else None
    sentences, claims = item.labels.get("sentences"), item.labels.get("claims")
    return Drawn(
        SampleSet(
            [Sample(text) for text in item.samples[:k]],
            answer_sentences=None if sentences is None else tuple(sentences),
            claims=None if claims is None else tuple(c["text"] for c in claims),
        ),
        answer,
        {},
    )


def score_items(
    detector: Detector,
    items: Sequence[Item],
    label_from: str,
    dse: str,
    nli: NLIModel | None,
    labeller: LLMLabeller | None,
    loop: asyncio.AbstractEventLoop,
) -> list[dict[str, Any]]:
    """Draw, score and label a group of items: one draw, one shared-prefix teacher pass; a row each
    (an ``error`` row when its sampling or scoring failed). Recorded items are not drawn."""
    params = detector.settings.sampling()
    greedy = greedy_params(detector) if label_from == "greedy" else None
    if label_from == RECORDED:
        drawn = [recorded_draw(it, params.k) for it in items]
    else:
        drawn = loop.run_until_complete(
            draw_group(detector.drawing_sampler, [(it.messages, params.k) for it in items], params, greedy)
        )
    ready: dict[int, SampleSet] = {}  # the items drawn without a failure, by position
    for n, d in enumerate(drawn):
        if isinstance(d.samples, SampleSet) and not isinstance(d.answer, BBWDError):
            d.samples.answer = d.answer  # the judged answer is forced with its samples, for AnswerWD
            ready[n] = d.samples
    checks = [dse_entails(items[n], dse, detector, nli) for n in ready]
    pairs = [(items[n].messages, sset) for n, sset in ready.items()]
    entails = [entails for entails, _ in checks]
    results: list[Result | BBWDError] = []
    if pairs and detector.settings.stop is not None:  # every round of the samples drawn, replayed in order
        results = loop.run_until_complete(score_in_rounds(detector, pairs, entails_each=entails, every_round=True))
    elif pairs:
        results = detector.score_many(pairs, entails_each=entails)
    out: list[dict[str, Any]] = []
    scored = dict(zip(ready, zip(results, checks, strict=True), strict=True))
    for n, (item, d) in enumerate(zip(items, drawn, strict=True)):
        result, (_, dse_name) = scored.get(n, (None, (None, "")))
        failure = next((x for x in (d.samples, d.answer, result) if isinstance(x, BBWDError)), None)
        if failure is not None:
            out.append({"id": item.id, "source": item.source, "error": str(failure), "transient": failure.transient})
            continue
        assert isinstance(result, Result), "an item whose draw did not fail is scored"
        result.timings = {**d.timings, **result.timings}
        out.append(item_row(item, result, ready[n], label_from, dse_name, labeller, calibration_id(detector)))
    return out


def calibration_id(detector: Detector) -> str | None:
    """The id of the wiring's calibration (rows carry it; a resume checks it), None without one."""
    return detector.calibration.id if detector.calibration is not None else None


def item_row(
    item: Item,
    result: Result,
    sset: SampleSet,
    label_from: str,
    dse_name: str,
    labeller: LLMLabeller | None,
    calibration: str | None = None,
) -> dict[str, Any]:
    """The labelled row of a scored item, from its samples and the judged answer forced with them (if any)."""
    samples, answer = sset.samples, sset.answer
    judged = answer if answer is not None else samples[0]
    extra: dict[str, Any] = {
        "protocol": item.protocol,
        "label_from": label_from,
        "answer": judged.text,
        "answer_finish_reason": judged.finish_reason,
        "finish_reasons": [s.finish_reason for s in samples],
        "dse_judge": dse_name,
    }
    if item.recorded:  # the record's sentences come back scored, in the row's ``sentences``
        extra.update({key: value for key, value in item.labels.items() if key not in ("sentences", "claims")})
        if "claims" in item.labels:  # they come back scored, in the row's ``claims``, their labels beside them
            extra["claim_labels"] = [c["label"] for c in item.labels["claims"]]
        return eval_row(item, result, extra, calibration)
    extra.update(prompt_labels(item.kind, judged.text, item.answers))
    if answer is not None:
        extra.update(prompt_labels(item.kind, samples[0].text, item.answers, "_first"))
    if labeller is not None:
        extra["label_judge"] = labeller.label(item.question, item.answers, judged.text)
    return eval_row(item, result, extra, calibration)


def score_item(
    detector: Detector,
    item: Item,
    label_from: str,
    dse: str,
    nli: NLIModel | None = None,
    labeller: LLMLabeller | None = None,
) -> dict[str, Any]:
    """Sample, score and label one item (a group of one); its row."""
    loop = asyncio.new_event_loop()
    try:
        return score_items(detector, [item], label_from, dse, nli, labeller, loop)[0]
    finally:
        loop.close()


def evaluate(
    detector: Detector,
    dataset: Dataset,
    out_dir: Path,
    *,
    label_from: str = "greedy",
    dse: str = "answer",
    nli: NLIModel | None = None,
    labeller: LLMLabeller | None = None,
    progress: Callable[[int, dict[str, Any] | None], None] | None = None,
) -> list[dict[str, Any]]:
    """Score and label every item of the dataset, ``detector.group_size`` at a time; return all rows of
    results.jsonl (earlier runs' included).

    ``progress(done, row)`` is called once with the number of the dataset's items already done and
    no row, then after each new row.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.jsonl"
    described = protocol(dataset, label_from, dse, nli.name if nli else None, detector.lne)
    label_from = described["label_from"]  # recorded data is judged on its response
    fp = run_fingerprint(detector, described)
    resume = eval_resume(path, fp, dataset.hashes, calibration_id(detector))
    # the readable settings of the rows (``bbwd calibrate`` reads them): the rows carry only fp
    reported = {**detector.reported_settings(), "protocol": described, "fingerprint": fp}
    (out_dir / "settings.json").write_text(json.dumps(reported, indent=1) + "\n", encoding="utf-8")
    seen = {r["id"] for r in resume.rows}
    done = sum(it.id in seen for it in dataset.items)
    if progress:
        progress(done, None)
    loop = asyncio.new_event_loop()  # an API sampler's client lives on it for the whole run

    def compute(skip: int, only: frozenset[str] | None, emit: Emit) -> None:
        """Score the items after the first ``skip`` (only those of ``only`` when given) in groups, a row each."""
        chosen = [it for it in dataset.items[skip:] if only is None or it.id in only]
        for group in groups(chosen, detector.group_size):
            for item, row in zip(
                group, score_items(detector, group, label_from, dse, nli, labeller, loop), strict=True
            ):
                row.update(fingerprint=fp, input_hash=item.input_hash)
                emit(row, item)

    new: list[dict[str, Any]] = []

    def appended(row: dict[str, Any], _: Any) -> None:
        nonlocal done
        new.append(row)
        done += 1
        if progress:
            progress(done, row)

    try:
        resume.run(compute, resume.steps([it.id for it in dataset.items], detector.group_size, appended=appended))
    finally:
        loop.close()
    return [*resume.rows, *new]
