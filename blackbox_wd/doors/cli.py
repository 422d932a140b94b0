"""The `bbwd` command line: parses options and delegates; errors become one line, exit code 2."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import functools
import inspect
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from blackbox_wd.adaptive import RULE
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.records import as_messages
from blackbox_wd.settings import GROUP_SIZE, Settings, check_group_size

if TYPE_CHECKING:
    from blackbox_wd.run.result import Result

app = typer.Typer(
    add_completion=False,
    invoke_without_command=True,
    help="Training-free hallucination detection with Wasserstein distances of teacher states.",
)

# The options that set a Settings field: field -> (type, option names, help). Their defaults are the
# Settings defaults, and ``with_settings`` adds them to a command once.
SETTING_OPTIONS: dict[str, tuple[Any, tuple[str, ...], str]] = {
    "k": (
        str,
        ("-k", "--k"),
        "Sampled responses per prompt, or auto: draw 3, 5, 10, ... up to --k-max and stop once the verdict is settled.",
    ),
    "k_max": (int | None, ("--k-max",), "With -k auto: the most responses a prompt draws (default 10)."),
    "temperature": (float, ("--temperature",), "Sampling temperature."),
    "top_p": (float, ("--top-p",), "Nucleus sampling mass."),
    "max_tokens": (int, ("--max-tokens",), "Max new tokens per response."),
    "seed": (int | None, ("--seed",), "Sampling seed."),
    "layer": (int | None, ("--layer",), "Teacher layer (default floor(L/2))."),
    "alpha": (float, ("--alpha",), "EigenWD diagonal shift (part of the result's settings)."),
    "norm": (
        str,
        ("--norm",),
        "Token states before transport: unit (each scaled to length 1), none (as the layer gives them) or auto "
        "(the teacher's own: none for smollm2-135m, unit for the others).",
    ),
    "target": (
        str | None,
        ("--target",),
        "Target model: API preset (gpt-4o-mini, deepseek-chat), served model name with --base-url, or a local model.",
    ),
    "teacher": (str, ("--teacher",), "Teacher: registry name, hub id, model folder or .gguf file."),
    "base_url": (str | None, ("--base-url",), "OpenAI-compatible endpoint of the target."),
    "api_key_env": (str | None, ("--api-key-env",), "Environment variable that holds the API key."),
    "cache": (
        bool,
        ("--cache/--no-cache",),
        "Read and write the API response cache, and in eval the teacher-state cache (--no-cache: neither).",
    ),
    "cache_dir": (
        str | None,
        ("--cache-dir",),
        "API response cache directory (eval's teacher states: its states/ folder).",
    ),
    "concurrency": (int, ("--concurrency",), "Max API requests in flight, shared by all prompts."),
    "device": (str, ("--device",), "auto, cpu, cuda or cuda:N."),
    "dtype": (str, ("--dtype",), "auto (bf16 on GPU, fp32 on CPU), float32, bfloat16, float16."),
    "token_budget": (int, ("--token-budget",), "Max padded tokens in one teacher forward pass."),
    "retry_budget": (float, ("--retry-budget",), "Seconds an API request may spend retrying 429/5xx/timeouts."),
    "base_rate": (
        float | None,
        ("--base-rate",),
        "Your share of hallucinated answers, in (0, 1): the risk is moved to it from the calibration's data by "
        "Bayes' rule; the flag keeps the calibration's false-positive rate.",
    ),
    "claims": (
        str | None,
        ("--claims",),
        "'target': ask the target to list each judged answer's claims (one request per answer, cached), then score "
        "each.",
    ),
}
SETTING_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Settings)} | {"k_max": None}
K_MAX = 10  # -k auto without --k-max
CalibrationFile = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        help="Calibration file (bbwd calibrate) for the verdict (p_hallucination, flag); refused unless "
        "fitted for these settings. Default: the one shipped for the teacher, when it applies.",
    ),
]
Verdict = Annotated[
    bool,
    typer.Option(
        "--verdict/--no-verdict",
        help="Give the calibrated verdict (p_hallucination, flag); --no-verdict: the scores only.",
    ),
]
SamplesFrom = Annotated[
    str | None,
    typer.Option(
        "--samples-from",
        help="Who drew the recorded samples, e.g. 'gpt-4o-mini at T=1.0': said in the reported settings "
        "(samples_from); only for recorded samples (no --target).",
    ),
]


def calibration_choice(path: Path | None, verdict: bool) -> Any:
    """The wiring's calibration (``Detector.from_settings``): a file's, "auto" (the shipped one) or None (no
    verdict)."""
    if path is not None and not verdict:
        raise BBWDError("give --calibration or --no-verdict, not both")
    if not verdict:
        return None
    if path is None:
        return "auto"
    from blackbox_wd.calibration import Calibration  # scipy.special: about 1 s more on `bbwd --help`

    return Calibration.load(path)


def say_note(note: str | None) -> None:
    """The calibration's one-line note (fitted on other samples, none ships), on stderr."""
    if note:
        typer.echo(note, err=True)


def with_settings(*, skip: tuple[str, ...] = ()) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add the SETTING_OPTIONS (but ``skip``) to a command, defaults from Settings; it gets them as ``options``.

    A parameter the command declares itself (another default or help) replaces the shared one and
    is passed to it as usual; it goes into the Settings through ``settings_from(options, name=value)``.
    """

    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for name, p in signature.parameters.items()
            if name != "options"
        ]
        shared = [name for name in SETTING_OPTIONS if name not in skip and name not in signature.parameters]
        added = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=SETTING_DEFAULTS[name],
                annotation=Annotated[
                    SETTING_OPTIONS[name][0], typer.Option(*SETTING_OPTIONS[name][1], help=SETTING_OPTIONS[name][2])
                ],
            )
            for name in shared
        ]

        @functools.wraps(command)
        def run(**values: Any) -> None:
            command(
                **{k: v for k, v in values.items() if k not in shared},
                options={k: v for k, v in values.items() if k in shared},
            )

        required = [p for p in own if p.default is p.empty]  # arguments first, then the settings
        rest = [p for p in own if p.default is not p.empty]
        run.__signature__ = signature.replace(parameters=required + added + rest)  # type: ignore[attr-defined]
        return run

    return wrap


class EngineOption(str, enum.Enum):
    """Where ``bbwd batch`` runs."""

    local = "local"
    ray = "ray"


@app.callback()
def _root(ctx: typer.Context) -> None:
    """bbwd: score prompts and JSONL logs for hallucination."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


def quiet_libraries() -> None:
    """Keep transformers' progress bars and warnings off the terminal: bbwd reports what it did."""
    from transformers.utils import logging as hf_logging  # transformers: seconds more on `bbwd --help`

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # a timed-out answer is simply not equivalent


def settings_from(options: dict[str, Any], **own: Any) -> Settings:
    """The Settings named by a command's shared options and its own (``own``); checked."""
    return Settings(**setting_values({**options, **own}))


def setting_values(options: dict[str, Any]) -> dict[str, Any]:
    """The Settings fields of a command's options: ``-k``/``--k-max`` become k and stop (``parse_k``)."""
    values = dict(options)
    values.update(parse_k(values.pop("k", SETTING_DEFAULTS["k"]), values.pop("k_max", None)))
    return values


def parse_k(k: Any, k_max: int | None) -> dict[str, Any]:
    """``-k N`` (always N samples) or ``-k auto`` (stages up to ``--k-max``) as the Settings fields k and stop."""
    if str(k).strip().lower() == "auto":
        return {"k": K_MAX if k_max is None else k_max, "stop": RULE}
    if k_max is not None:
        raise BBWDError("--k-max applies with -k auto")
    try:
        return {"k": int(k), "stop": None}
    except ValueError:
        raise BBWDError(f"k must be an integer >= 2 or auto (got {k})") from None


def render(result: Result, console: Console) -> None:
    """Human-readable table of responses, D and scores."""
    table = Table(title="Responses")
    table.add_column("#", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("response")
    for i, (text, n) in enumerate(zip(result.responses, result.token_counts, strict=True)):
        table.add_row(str(i), str(n), text.replace("\n", " ")[:160])
    console.print(table)
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
    from blackbox_wd.signals.baselines.peers import PEER_NAMES  # numpy and scipy: loaded by then, not by `bbwd --help`

    paper = {k: v for k, v in result.baselines.items() if k not in PEER_NAMES}
    if paper:
        console.print("baselines: " + ", ".join(f"{k.upper()} {v:.4g}" for k, v in paper.items()))
    peers = [f"{name} {result.baselines[k]:.3g}" for k, name in PEER_NAMES.items() if k in result.baselines]
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
    each stage's p and whether it settled."""
    s = result.settings
    line = f"cost: {len(result.responses)} of {s['k']} samples, {result.target_tokens} target tokens"
    if result.stages:
        looked = ", ".join(
            f"{st['k']}: p {'-' if st['p_hallucination'] is None else format(st['p_hallucination'], '.2f')}"
            f" {'settled' if st['settled'] else 'open'}"
            for st in result.stages
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
    options: dict[str, Any] | None = None,
) -> None:
    """Score one prompt: sample K responses, teacher-force them, print D, AvgWD, EigenWD and, calibrated, the risk;
    with --response, that answer's AnswerWD and its sentences' scores."""
    settings = settings_from(options or {})  # a setting out of range fails here, before torch loads
    if response is not None and not response.strip():
        raise BBWDError("--response is empty")
    if settings.claims is not None and (response is None or claim):
        raise BBWDError("--claims target lists the claims of the --response: give one, and no --claim")
    messages = as_messages(prompt)  # an empty prompt fails here, before torch loads
    from blackbox_wd.run.detector import Detector  # torch and transformers: seconds more on `bbwd --help`

    choice = calibration_choice(calibration, verdict)
    quiet_libraries()
    detector = Detector.from_settings(settings, choice)
    say_note(detector.calibration_note)
    result = detector.score(messages, answer=response, claims=claim)  # with --claims target, the target's
    if as_json:
        json.dump(result.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        render(result, Console())


@app.command()
@with_settings()
def batch(
    logs: Annotated[Path, typer.Argument(help="JSONL input: id?, prompt|messages, responses?, label?")],
    output: Annotated[Path, typer.Option("-o", "--output", help="JSONL output (appended; a rerun resumes it).")],
    k: Annotated[
        str | None,
        typer.Option(
            "-k",
            "--k",
            help="Responses per record (default: 10 with --target, else the count of the first record with 2 or "
            "more), or auto: draw from --target in stages up to --k-max and stop once the verdict is settled.",
        ),
    ] = None,
    group_size: Annotated[int, typer.Option("--group-size", help="Records per shared teacher pass.")] = GROUP_SIZE,
    save_matrix: Annotated[bool, typer.Option("--save-matrix", help="Add D to every output line.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 if any record had an error.")] = False,
    calibration: CalibrationFile = None,
    verdict: Verdict = True,
    engine: Annotated[
        EngineOption,
        typer.Option("--engine", help="local: this process; ray: a Ray cluster (needs the 'ray' extra), same output."),
    ] = EngineOption.local,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address", help="Ray cluster for --engine ray (default: $RAY_ADDRESS, else a new local one)."
        ),
    ] = None,
    samples_from: SamplesFrom = None,
    options: dict[str, Any] | None = None,
) -> None:
    """Score a JSONL log, one output line per input line. With --target, records with fewer than K responses are
    topped up from it; without, the responses are recorded samples (target "recorded"), the first K of each
    scored as they are. Rows that bbwd batch wrote, given as the input, are judged again with --calibration (or
    the shipped one): no teacher pass, no sampling."""
    if not logs.is_file():  # before torch loads
        raise BBWDError(f"input file not found: {logs}")
    if ray_address is not None and engine is not EngineOption.ray:
        raise BBWDError("--ray-address needs --engine ray")
    options = options or {}
    from blackbox_wd.doors.rejudge import is_scored

    if is_scored(logs):
        return rejudge_scored(logs, output, k, options, calibration, verdict)
    sample_missing = options.get("target") is not None  # else the responses are recorded samples
    if options.get("claims") is not None and not sample_missing:
        raise BBWDError("--claims target needs --target: the model that lists the claims (a recorded log has none)")
    from blackbox_wd.doors.batch import BatchRunner, Runner, check_output_path, plan_k, read_done  # torch: as score's
    from blackbox_wd.run.detector import Detector  # torch and transformers: seconds more on `bbwd --help`

    quiet_libraries()
    check_group_size(group_size)
    check_output_path(output)
    read_done(output)  # not bbwd output: refused before any model loads
    if samples_from is not None and sample_missing:
        raise BBWDError("--samples-from says who drew recorded samples: with --target the samples are drawn here")
    parsed = None if k is None else parse_k(k, options.get("k_max"))
    if parsed is not None and parsed["stop"] is not None:
        settings, k_source = settings_from(options, k=k), "-k auto"
    else:
        planned, k_source = plan_k(logs, None if parsed is None else parsed["k"], sample_missing)
        settings = settings_from(options, k=planned)
    choice = calibration_choice(calibration, verdict)
    err = Console(stderr=True)
    cluster: contextlib.AbstractContextManager[None]
    engine_runner: type[Runner] = BatchRunner
    if engine is EngineOption.ray:
        from blackbox_wd.doors.ray_engine import RayRunner, ray_cluster  # ray: an optional extra

        cluster, engine_runner = ray_cluster(ray_address), RayRunner
    else:
        cluster = contextlib.nullcontext()
    recorded = not sample_missing  # no --target: the log's responses are recorded samples
    with cluster:  # the engine's detector, built once: the driver's for Ray, this process's for the local engine
        built = engine_runner.build_options(settings)
        detector = Detector.from_settings(
            settings, choice, recorded=recorded, samples_from=samples_from, group_size=group_size, **built
        )
        runner = engine_runner(detector, sample_missing)
        say_note(runner.detector.calibration_note)
        with Progress(
            TextColumn("[bold]bbwd batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:.2f} rec/s, {task.fields[errors]} errors"),
            TimeElapsedColumn(),
            console=err,
            disable=not err.is_terminal,
        ) as bar:
            task = bar.add_task("score", total=None, rate=0.0, errors=0)

            def progress(done: int, errors: int) -> None:
                elapsed = bar.tasks[0].elapsed or 1e-9
                bar.update(task, completed=done, rate=done / elapsed, errors=errors)

            summary = asyncio.run(runner.run(logs, output, save_matrix, progress))
    summary.k_source = k_source
    summary.settings = runner.detector.reported_settings()
    err.print(summary.line(), highlight=False, soft_wrap=True)
    typer.echo(summary.settings_line(), err=True)  # JSON as it is: no markup, no wrapping
    if strict and summary.errors:
        raise typer.Exit(1)


def rejudge_scored(
    scored: Path, output: Path, k: str | None, options: dict[str, Any], calibration: Path | None, verdict: bool
) -> None:
    """``bbwd batch`` on rows it wrote: each judged again with the calibration (``rejudge``), nothing scored."""
    from blackbox_wd.doors.batch import check_output_path, read_done
    from blackbox_wd.doors.rejudge import rejudge

    given = [
        f"--{name.replace('_', '-')}"
        for name, value in options.items()
        if name != "base_rate" and value != SETTING_DEFAULTS.get(name)
    ]
    if k is not None or given:
        raise BBWDError(
            f"{scored} holds rows bbwd batch wrote, judged again as they were scored: "
            f"{', '.join(['-k'] * (k is not None) + given)} would change their scores (give the log instead)"
        )
    if not verdict:
        raise BBWDError(f"{scored} holds scored rows: --no-verdict leaves nothing to do")
    check_output_path(output)
    if output.resolve() == scored.resolve():
        raise BBWDError(f"-o {output} is the input: write the judged rows to another file")
    read_done(output)  # not bbwd output: never replaced
    choice = calibration_choice(calibration, verdict)
    summary = rejudge(scored, output, choice, base_rate=options.get("base_rate"))
    for note in summary.notes:
        say_note(note)
    typer.echo(summary.line(), err=True)


@app.command("eval")
@with_settings(skip=("token_budget", "claims"))
def eval_command(
    data: Annotated[
        str,
        typer.Option("--data", help="Dataset JSONL (../shared/data format) or a short name: nq, sciq, squad, math500."),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="Report folder.")] = Path("report"),
    limit: Annotated[
        int | None, typer.Option("--limit", help="Score the first N prompts (exemplars excluded).")
    ] = None,
    protocol: Annotated[
        str,
        typer.Option(
            "--protocol",
            help="few-shot (5 exemplars of the data file as chat turns, short answers) or zero-shot. "
            "MATH is zero-shot under both.",
        ),
    ] = "few-shot",
    label_from: Annotated[
        str,
        typer.Option(
            "--label-from",
            help="Judged answer: greedy (one extra answer at temperature 0) or first (the first of the K samples).",
        ),
    ] = "greedy",
    dse: Annotated[
        str,
        typer.Option(
            "--dse",
            help="DSE judge: answer (QA: equal normalised answers; MATH: equivalent final answers), nli (needs --nli), "
            "teacher (the teacher LM's yes/no), none.",
        ),
    ] = "answer",
    nli: Annotated[
        str | None,
        typer.Option(
            "--nli", help="NLI model for --dse nli: hub id or local folder (e.g. microsoft/deberta-large-mnli)."
        ),
    ] = None,
    require_context: Annotated[
        bool,
        typer.Option(
            "--require-context", help="Score only records with a non-empty context (e.g. SciQ with its support)."
        ),
    ] = False,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens", help="Max new tokens per response (default 128; 512 when the data has MATH items)."
        ),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option("--judge", help="Also label with an LLM judge: API preset or model name (with --judge-base-url)."),
    ] = None,
    judge_base_url: Annotated[
        str | None, typer.Option("--judge-base-url", help="OpenAI-compatible endpoint of the judge.")
    ] = None,
    judge_api_key_env: Annotated[
        str | None, typer.Option("--judge-api-key-env", help="Environment variable with the judge's API key.")
    ] = None,
    lne: Annotated[
        bool,
        typer.Option(
            "--lne/--no-lne",
            help="Run the LNE baseline. Without a target's log-probs it needs the teacher's: all its layers and its "
            "output head, 2.5x (SmolLM2) to 6x (Gemma-3) the teacher time of the other methods.",
        ),
    ] = True,
    calibration: CalibrationFile = None,
    verdict: Verdict = True,
    samples_from: SamplesFrom = None,
    options: dict[str, Any] | None = None,
) -> None:
    """Score a dataset with AvgWD, EigenWD and the baselines; write results.jsonl, summary.md and plots."""
    from blackbox_wd.doors.eval.main import EvalOptions, execute, plan  # torch and transformers: as score's

    quiet_libraries()
    request = plan(
        data,
        output,
        setting_values(options or {}),
        EvalOptions(
            limit=limit,
            protocol_name=protocol,
            label_from=label_from,
            dse=dse,
            nli=nli,
            require_context=require_context,
            max_tokens=max_tokens,
            judge=judge,
            judge_base_url=judge_base_url,
            judge_api_key_env=judge_api_key_env,
            lne=lne,
            calibration=calibration_choice(calibration, verdict),
            samples_from=samples_from,
        ),
    )
    err = Console(stderr=True)
    with Progress(
        TextColumn("[bold]bbwd eval"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}, {task.fields[errors]} errors"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err,
        disable=not err.is_terminal,
        speed_estimate_period=3600,
    ) as bar:
        task = bar.add_task("eval", total=len(request.dataset.items), rate="", errors=0)
        start = {"done": 0, "errors": 0}

        def progress(done: int, row: dict | None) -> None:
            if row is None:  # the rows an earlier run left
                start["done"] = done
                bar.reset(task, completed=done)
                return
            start["errors"] += "error" in row
            new, elapsed = done - start["done"], bar.tasks[0].elapsed or 1e-9
            bar.update(task, completed=done, rate=f"{elapsed / new:.1f} s/prompt", errors=start["errors"])

        message = execute(request, progress)
    err.print(message, highlight=False, soft_wrap=True)  # the note one line, as every door says it


@app.command()
def calibrate(
    results: Annotated[
        list[Path],
        typer.Argument(
            help="Labelled JSONL: bbwd eval's results.jsonl (one or more; runs of the same settings at several K, "
            "e.g. -k 3, 5, 10, 20, give heads for each K), or rows with the scores and a 0/1 label (1 = "
            "hallucination) or a passage label in [0, 1] (human_score, unsupported_share)."
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Calibration file to write (default calibration.json); a full fit's report (<name>.md, "
            "<name>.reliability.png) goes beside it. With --suggest: the rows to label (default to_label.jsonl).",
        ),
    ] = None,
    label: Annotated[
        str, typer.Option("--label", help="Label field: label, label_em, label_judge, ... (else human_score).")
    ] = "label",
    settings_from: Annotated[
        Path | None,
        typer.Option(
            "--settings-from",
            help="The rows' reported settings (JSON object); default: settings.json beside the first RESULTS, "
            "which bbwd eval writes.",
        ),
    ] = None,
    target_fpr: Annotated[
        float,
        typer.Option("--target-fpr", help="Each threshold: the smallest whose cross-validated FPR is at most this."),
    ] = 0.1,
    folds: Annotated[int, typer.Option("--folds", help="Cross-validation folds (grouped by prompt).")] = 5,
    samples: Annotated[
        str | None,
        typer.Option(
            "--samples",
            help="Who drew the rows' samples, e.g. 'gpt-3.5-turbo at T=1.0, recorded in the data'; "
            "required when they came recorded with the data.",
        ),
    ] = None,
    combiner: Annotated[
        str | None,
        typer.Option(
            "--combiner",
            help="How the answer heads weigh their members: mean (every member, equal weights; the default, chosen "
            "leave-one-set-out on the recorded dev sets), select (forward selection, an equal-weight mean of those "
            "kept) or logistic (L2, C = 1).",
        ),
    ] = None,
    refit: Annotated[
        str,
        typer.Option(
            "--refit",
            help="auto (a map of the calibration that judged the rows below the labelled rows a full fit needs, "
            "else full), map (its p mapped: slope and offset), prior (its p moved: offset only) or full.",
        ),
    ] = "auto",
    base: Annotated[
        Path | None,
        typer.Option(
            "--base",
            help="The calibration whose map a few labels refit (default: the one that judged the rows, when it is "
            "the one shipped for their settings).",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Write a calibration that judges worse than the labelled base rate out of fold."),
    ] = False,
    suggest: Annotated[
        int | None,
        typer.Option(
            "--suggest",
            help="Write N of the scored rows to label (spread evenly over their risk) to -o, instead of fitting.",
        ),
    ] = None,
) -> None:
    """Fit a calibration (the combined verdict: a probability of hallucination and a flag, for answers and their
    sentences) on labelled results: bbwd eval's, or bbwd batch's rows with a label added. A few labelled rows refit
    the map and threshold of the calibration that judged them; enough for a full fit, every head."""
    from blackbox_wd.doors import calibrate as door  # scikit-learn, matplotlib: seconds more on `bbwd --help`
    from blackbox_wd.doors.batch import check_output_path  # torch: as score's

    if suggest is not None:
        output = output or Path("to_label.jsonl")
        check_output_path(output)
        typer.echo(door.write_suggestion(results, suggest, output), err=True)
        return
    output = output or Path("calibration.json")
    check_output_path(output)
    line = door.calibrate(
        results,
        output,
        label=label,
        settings_from=settings_from,
        samples=samples,
        combiner=combiner,
        folds=folds,
        target_fpr=target_fpr,
        refit=refit,
        base=base,
        force=force,
    )
    typer.echo(line, err=True)


@app.command()
def report(
    scores: Annotated[Path, typer.Argument(help="Scored rows: bbwd batch's output, eval's results.jsonl, re-judged.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML page written.")] = Path("report.html"),
    log: Annotated[
        Path | None, typer.Option("--log", help="The log the rows were scored from: their prompts and samples.")
    ] = None,
    calibration: Annotated[
        Path | None, typer.Option("--calibration", help="Calibration file whose promise the page states.")
    ] = None,
) -> None:
    """Write one self-contained HTML page of scored rows: counts, calibration, risk chart, rows table, details."""
    from blackbox_wd.doors.report.page import write_report

    done = write_report(scores, output, log, calibration, warn=lambda line: typer.echo(line, err=True))
    typer.echo(
        f"{done.path}: {done.rows} rows, {done.flagged} flagged, {done.errors} errors, {done.bytes:,} bytes", err=True
    )


SERVE_MODULES = {"fastapi", "starlette", "uvicorn", "prometheus_client", "pydantic"}


@app.command()
@with_settings()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8080,
    server_key_env: Annotated[
        str | None,
        typer.Option(
            "--server-key-env",
            help="Environment variable holding the bearer token clients must send (needed to bind a non-loopback "
            "address).",
        ),
    ] = None,
    calibration: CalibrationFile = None,
    verdict: Verdict = True,
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", help="Largest request body accepted (413 above).")
    ] = 4 * 1024 * 1024,
    batch_wait_ms: Annotated[
        float,
        typer.Option("--batch-wait-ms", help="How long a lone request waits for others to share its teacher pass."),
    ] = 5.0,
    options: dict[str, Any] | None = None,
) -> None:
    """Serve an OpenAI-compatible /v1/chat/completions that answers every call and adds its bbwd verdict."""
    try:
        from blackbox_wd.doors.serve.app import ServeOptions, run  # the 'serve' extra, and torch as score's
    except ModuleNotFoundError as exc:
        if exc.name not in SERVE_MODULES:
            raise
        raise BBWDError(
            f"bbwd serve needs the 'serve' extra ({exc.name} is missing): pip install 'blackbox-wd[serve]'"
        ) from None

    quiet_libraries()
    settings = settings_from(options or {})
    run(
        settings,
        ServeOptions(
            host=host,
            port=port,
            server_key_env=server_key_env,
            calibration=calibration_choice(calibration, verdict),
            max_body_bytes=max_body_bytes,
            batch_wait_ms=batch_wait_ms,
        ),
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``bbwd``: every failure ends as one ``error:`` line on stderr.

    Bad input (a usage error or a BBWDError) exits 2, an interrupt 130, anything unexpected 1 with
    its type and message (``BBWD_DEBUG=1`` shows its traceback instead, and that of the exception
    a BBWDError wraps).
    """
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="bbwd", standalone_mode=False)
    except BBWDError as exc:
        if os.environ.get("BBWD_DEBUG") and exc.__cause__ is not None:
            raise  # the traceback of the exception it wraps
        typer.echo(f"error: {one_line(exc, 1000)}", err=True)
        code = 2
    except typer.TyperException as exc:  # usage errors: a bad option value, a missing argument
        ctx = getattr(exc, "ctx", None)
        where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        typer.echo(f"error: {one_line(exc.format_message(), 1000)}{where}", err=True)
        code = getattr(exc, "exit_code", 2)
    except (KeyboardInterrupt, typer.Abort):
        typer.echo("error: interrupted", err=True)
        code = 130
    except Exception as exc:  # noqa: BLE001 - the CLI edge: one line, not a traceback
        if os.environ.get("BBWD_DEBUG"):
            raise
        typer.echo(
            f"error: unexpected {type(exc).__name__}: {one_line(exc)} (set BBWD_DEBUG=1 for the traceback)", err=True
        )
        code = 1
    sys.exit(code or 0)
