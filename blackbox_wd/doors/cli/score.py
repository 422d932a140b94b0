"""`bbwd score`: one prompt scored, its result rendered on the terminal or as JSON."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from blackbox_wd.doors.cli.app import (
    CalibrationFile,
    Verdict,
    app,
    calibration_choice,
    detector_from,
    quiet_libraries,
    say_note,
    settings_from,
    with_settings,
)
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import JSONObject, as_messages
from blackbox_wd.signals.names import PEER_SHORT_NAMES

if TYPE_CHECKING:
    from blackbox_wd.run.result import Result


def render(result: Result, console: Console) -> None:
    """Human-readable table of responses, D and scores."""
    table = Table(title="Responses")
    table.add_column("#", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("response")
    for i, (text, n) in enumerate(zip(result.responses, result.token_counts, strict=True)):
        table.add_row(str(i), str(n), text.replace("\n", " ")[:160])
    console.print(table)
    assert result.D is not None, "bbwd score forces every prompt (all_scores): D, AvgWD and EigenWD"
    console.print("[bold]D[/bold] (W2 distances between the responses' token-state measures)")
    console.print("    " + "".join(f"{j:>7}" for j in range(len(result.D))), highlight=False)
    for i, row in enumerate(result.D):
        console.print(f"{i:>3} " + "".join(f"{v:7.1f}" for v in row), highlight=False)
    s = result.settings
    console.print(f"[bold]AvgWD[/bold]   {result.avg_wd:.6g}")
    console.print(
        f"[bold]EigenWD[/bold] {result.eigen_wd:.6g}   (p={s['p']}, alpha={s['alpha']}, bandwidth={s['bandwidth']:.4g})"
    )
    if result.eigen_wd_fixed is not None:
        console.print(f"EigenWD {result.eigen_wd_fixed:.6g}   (the teacher's fixed bandwidth)")
    paper = {k: v for k, v in result.baselines.items() if k not in PEER_SHORT_NAMES}
    if paper:
        console.print("baselines: " + ", ".join(f"{k.upper()} {v:.4g}" for k, v in paper.items()))
    peers = [f"{name} {result.baselines[k]:.3g}" for k, name in PEER_SHORT_NAMES.items() if k in result.baselines]
    if peers:  # lm-polygraph's estimators
        console.print("peers: " + ", ".join(peers))
    render_answer(result, console)
    render_claims(result, console)
    drawn = f" sampler={s['sampler']}" if s.get("sampler") else ""
    console.print(
        f"target={s['target']}{drawn} teacher={s['teacher']} layer={s['layer']}/{s['n_layers']} K={s['k']} "
        f"T={s['temperature']} top_p={s['top_p']} seed={s['seed']} device={s['device']}"
    )
    if result.p_hallucination is not None:
        console.print(verdict_lines(result), highlight=False)
    console.print(cost_line(result), highlight=False)
    u = result.usage
    if u.requests or u.cache_hits:
        console.print(
            f"API: {u.requests} requests, {u.cache_hits} from cache, {u.retries} retries, "
            f"{u.completion_tokens} completion tokens fresh, {u.cached_completion_tokens} cached"
        )


def verdict_lines(result: Result) -> str:
    """The calibrated verdict as a reader sees it: the calibration and the data it was fitted on, the risk and
    flag with the threshold's false-positive rate, the members it rests on, and the base rate p is at."""
    c = result.calibration or {}
    op = c.get("operating_point", {})
    data = ", ".join(f"{name} ({n})" for name, n in (c.get("data") or {}).items())
    rate = c.get("base_rate") or {}
    stated = rate.get("stated")
    at = (
        f"base rate {stated:g} (yours; {rate.get('fitted', float('nan')):.2f} in its data)"
        if stated is not None
        else f"base rate {rate.get('fitted', float('nan')):.2f} of its data (--base-rate for yours)"
    )
    members = ", ".join(c.get("members") or [])
    lo, hi = op.get("fpr_range") or (None, None)
    spread = f", {lo:.0%}-{hi:.0%} on a data set left out" if lo is not None else ""
    return (
        f"calibration: {c.get('origin')}, fitted on {data} (label {c.get('label')}, fingerprint "
        f"{c.get('fingerprint')})\n"
        f"[bold]risk {result.p_hallucination:.2f}[/bold] - {'flagged' if result.flag else 'not flagged'} "
        f"(threshold {op.get('threshold', float('nan')):.2f} at FPR {op.get('fpr', float('nan')):.0%}{spread} on "
        f"{c.get('n')} labelled prompts; p at {at})\n"
        f"from: {members}"
    )


def cost_line(result: Result) -> str:
    """What the verdict cost: the samples drawn of the most it may draw, the target's tokens, and with -k auto
    each round's p and whether it settled."""
    s = result.settings
    line = f"cost: {len(result.responses)} of {s['k']} samples, {result.target_tokens} target tokens"
    if result.rounds:
        looked = ", ".join(
            f"{st.k}: p {'-' if st.p_hallucination is None else format(st.p_hallucination, '.2f')}"
            f" {'settled' if st.settled else 'open'}"
            for st in result.rounds
        )
        line += f" (-k auto: {looked})"
    return line


RISK_COLOURS = ("green", "yellow", "red")


def risk_colours(scores: list[float | None]) -> list[str | None]:
    """Each score's colour among these scores: lowest third green, middle yellow, highest red (None for None)."""
    known = [v for v in scores if v is not None]
    return [
        None if v is None else RISK_COLOURS[min(2, int(3 * (sum(k < v for k in known) + 0.5) / len(known)))]
        for v in scores
    ]


def render_answer(result: Result, console: Console) -> None:
    """The judged answer's AnswerWD and its sentences, each with its score, coloured by rank within the answer."""
    if result.answer_error is not None:
        console.print(f"[bold]AnswerWD[/bold] not computed: {escape(result.answer_error)}")
    if result.answer_wd is None:
        return
    console.print(f"[bold]AnswerWD[/bold] {result.answer_wd:.6g}   (mean W2 from the answer to the K samples)")
    if result.answer_nll is not None and result.cocoa is not None:
        console.print(
            f"[bold]answer NLL[/bold] {result.answer_nll:.4g} nats/token under the teacher; "
            f"[bold]CoCoA[/bold] {result.cocoa:.6g}   (NLL x AnswerWD)"
        )
    if not result.sentences:
        return
    judged = any(x.p_hallucination is not None for x in result.sentences)
    console.print(
        "[bold]Sentences[/bold] of the answer: "
        + (
            "risk (the sentence head's p; flagged in red), W2-like cost under the sample that explains it best, "
            "surprise of its rarest word among the samples"
            if judged
            else "W2-like cost under the sample that explains each best (red: the highest third of this answer's "
            "sentences, green: the lowest)"
        )
    )
    colours = risk_colours([x.score for x in result.sentences])
    for sentence, colour in zip(result.sentences, colours, strict=True):
        score = "-" if sentence.score is None else f"{sentence.score:.4g}"
        text = sentence.text.replace("\n", " ")
        if judged:
            risk = "-" if sentence.p_hallucination is None else f"{sentence.p_hallucination:.2f}"
            surprise = "-" if sentence.unigram is None else f"{sentence.unigram:.3g}"
            style = "red" if sentence.flag else "green" if sentence.flag is False else "dim"
            console.print(Text(f"{risk:>5} {score:>9} {surprise:>6}  {text}", style=style))
        else:
            console.print(Text(f"{score:>9}  {text}", style=colour or "dim"))
    console.print(f"[bold]SentenceWD[/bold] {result.sentence_wd:.6g}   (mean of the sentence scores)")


def render_claims(result: Result, console: Console) -> None:
    """The claims given, each with its risk (the claim head's p; flagged in red) and its score, or its error."""
    if not result.claims:
        return
    console.print(
        "[bold]Claims[/bold]: risk (the claim head's p; flagged in red), share of the samples that lack one of its "
        "key words"
    )
    for claim in result.claims:
        text = claim.text.replace("\n", " ")
        if claim.error is not None:
            console.print(Text(f"    -         -  {text}: {claim.error}", style="dim"))
            continue
        risk = "-" if claim.p_hallucination is None else f"{claim.p_hallucination:.2f}"
        style = "red" if claim.flag else "green" if claim.flag is False else "dim"
        console.print(Text(f"{risk:>5} {claim.score:>9.2f}  {text}", style=style))


@app.command()
@with_settings(skip=("token_budget",))
def score(
    prompt: Annotated[str, typer.Argument(help="The prompt to score.")],
    response: Annotated[
        str | None,
        typer.Option(
            "--response", help="The answer to check: its AnswerWD and per-sentence risk against the K samples."
        ),
    ] = None,
    claim: Annotated[
        list[str] | None,
        typer.Option(
            "--claim",
            help="A statement about the answer to check (repeatable): its risk, from how many samples state it.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    calibration: CalibrationFile = None,
    verdict: Verdict = True,
    options: JSONObject | None = None,
) -> None:
    """Score one prompt: sample K responses, teacher-force them, print D, AvgWD, EigenWD and, calibrated, the risk;
    with --response, that answer's AnswerWD and its sentences' scores."""
    settings = settings_from(options or {})  # a setting out of range fails here, before torch loads
    if response is not None and not response.strip():
        raise BBWDError("--response is empty")
    if settings.claims is not None and (response is None or claim):
        raise BBWDError("--claims target lists the claims of the --response: give one, and no --claim")
    messages = as_messages(prompt)  # an empty prompt fails here, before torch loads
    choice = calibration_choice(calibration, verdict)
    quiet_libraries()
    # where the method is shown (D, AvgWD, EigenWD), for one prompt: start-up before throughput
    detector = detector_from(settings, choice, all_scores=True, one_prompt=True)
    say_note(detector.calibration_note)
    result = detector.score(messages, answer=response, claims=claim)  # with --claims target, the target's
    if as_json:
        json.dump(result.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        render(result, Console())
