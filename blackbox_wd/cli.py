"""The `bbwd` command line: parses options and delegates; errors become one line, exit code 2."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.pipeline import Result
from blackbox_wd.settings import Settings

app = typer.Typer(add_completion=False, invoke_without_command=True,
                  help="Training-free hallucination detection with Wasserstein distances of teacher states.")

# Options shared by the commands.
K = Annotated[int, typer.Option("-k", "--k", help="Number of sampled responses per prompt.")]
Temperature = Annotated[float, typer.Option("--temperature", help="Sampling temperature.")]
TopP = Annotated[float, typer.Option("--top-p", help="Nucleus sampling mass.")]
MaxTokens = Annotated[int, typer.Option("--max-tokens", help="Max new tokens per response.")]
Seed = Annotated[Optional[int], typer.Option("--seed", help="Sampling seed.")]
Layer = Annotated[Optional[int], typer.Option("--layer", help="Teacher layer (default floor(L/2)).")]
Alpha = Annotated[float, typer.Option("--alpha", help="EigenWD diagonal shift (part of the result's settings).")]
Target = Annotated[Optional[str], typer.Option("--target", help="Target model: API preset (gpt-4o-mini, deepseek-chat), served model name with --base-url, or a local model.")]
Teacher = Annotated[str, typer.Option("--teacher", help="Teacher: registry name, hub id, model folder or .gguf file.")]
BaseUrl = Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint of the target.")]
ApiKeyEnv = Annotated[Optional[str], typer.Option("--api-key-env", help="Environment variable that holds the API key.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Neither read nor write the API response cache.")]
CacheDir = Annotated[Optional[str], typer.Option("--cache-dir", help="API response cache directory.")]
Concurrency = Annotated[int, typer.Option("--concurrency", help="Max API requests in flight, shared by all prompts.")]
Device = Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
Dtype = Annotated[str, typer.Option("--dtype", help="auto (bf16 on GPU, fp32 on CPU), float32, bfloat16, float16.")]
TokenBudget = Annotated[int, typer.Option("--token-budget", help="Max padded tokens in one teacher forward pass.")]
RetryBudget = Annotated[float, typer.Option("--retry-budget", help="Seconds an API request may spend retrying 429/5xx/timeouts.")]
CalibrationFile = Annotated[Optional[Path], typer.Option("--calibration", help="Calibration file (bbwd calibrate): adds "
                                                      "p_hallucination and flag; refused unless fitted for these settings.")]


class Engine(str, enum.Enum):
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
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # a timed-out answer is simply not equivalent


def settings_from(options: dict) -> Settings:
    """The Settings named by a command's options (``--no-cache`` becomes ``cache=False``); checked."""
    fields = {f.name for f in dataclasses.fields(Settings)}
    values = {k: v for k, v in options.items() if k in fields}
    return Settings(**values, cache=not options["no_cache"])


def render(result: Result, console: Console) -> None:
    """Human-readable table of responses, D and scores."""
    table = Table(title="Responses")
    table.add_column("#", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("response")
    for i, (text, n) in enumerate(zip(result.responses, result.token_counts)):
        table.add_row(str(i), str(n), text.replace("\n", " ")[:160])
    console.print(table)
    console.print("[bold]D[/bold] (W2 distances between the responses' token-state measures)")
    console.print("    " + "".join(f"{j:>7}" for j in range(len(result.D))), highlight=False)
    for i, row in enumerate(result.D):
        console.print(f"{i:>3} " + "".join(f"{v:7.1f}" for v in row), highlight=False)
    s = result.settings
    console.print(f"[bold]AvgWD[/bold]   {result.avg_wd:.6g}")
    console.print(f"[bold]EigenWD[/bold] {result.eigen_wd:.6g}   (p={s['p']}, alpha={s['alpha']}, bandwidth={s['bandwidth']:.4g})")
    console.print(f"target={s['target']} teacher={s['teacher']} layer={s['layer']}/{s['n_layers']} K={s['k']} "
                  f"T={s['temperature']} top_p={s['top_p']} seed={s['seed']} device={s['device']}")
    if result.p_hallucination is not None:
        c = result.calibration or {}
        op = c.get("operating_point", {})
        console.print(f"calibration: {c.get('origin')} (label {c.get('label')}, fingerprint {c.get('fingerprint')})",
                      highlight=False)
        console.print(f"[bold]risk {result.p_hallucination:.2f}[/bold] - {'flagged' if result.flag else 'not flagged'} "
                      f"(threshold {c.get('threshold', float('nan')):.2f}, FPR {op.get('fpr', float('nan')):.0%} on "
                      f"{c.get('n')} labelled prompts)", highlight=False)
    u = result.usage
    if u.requests or u.cache_hits:
        console.print(f"API: {u.requests} requests, {u.cache_hits} from cache, {u.retries} retries, "
                      f"{u.completion_tokens} completion tokens fresh, {u.cached_completion_tokens} cached")


@app.command()
def score(
    prompt: Annotated[str, typer.Argument(help="The prompt to score.")],
    k: K = 10, temperature: Temperature = 0.5, top_p: TopP = 1.0, max_tokens: MaxTokens = 128,
    seed: Seed = 0, layer: Layer = None, alpha: Alpha = Settings.alpha, target: Target = None,
    teacher: Teacher = Settings.teacher, base_url: BaseUrl = None, api_key_env: ApiKeyEnv = None,
    no_cache: NoCache = False, cache_dir: CacheDir = None, concurrency: Concurrency = 16,
    device: Device = "auto", dtype: Dtype = "auto", retry_budget: RetryBudget = Settings.retry_budget,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    calibration: Annotated[Optional[Path], typer.Option(
        "--calibration", help="Calibration file (bbwd calibrate): adds the risk and a flag; refused unless fitted for "
                              "these settings. Default: the embedded one for the teacher, when it matches.")] = None,
) -> None:
    """Score one prompt: sample K responses, teacher-force them, print D, AvgWD, EigenWD and, calibrated, the risk."""
    from blackbox_wd.calibration import Calibration, embedded_calibration
    from blackbox_wd.pipeline import Detector, as_messages

    quiet_libraries()
    settings = settings_from(locals())
    messages = as_messages(prompt)
    detector = Detector.from_settings(settings, Calibration.load(calibration) if calibration else None)
    if calibration is None:
        embedded, note = embedded_calibration(detector.reported_settings())
        detector = detector.with_calibration(embedded)
        if note:
            typer.echo(note, err=True)
    result = detector.score(messages)
    if as_json:
        json.dump(result.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        render(result, Console())


@app.command()
def batch(
    logs: Annotated[Path, typer.Argument(help="JSONL input: id?, prompt|messages, responses?, label?")],
    output: Annotated[Path, typer.Option("-o", "--output", help="JSONL output (appended; a rerun resumes it).")],
    k: Annotated[Optional[int], typer.Option("-k", "--k", help="Responses per record (default: 10 with --target, "
                                             "else the count of the first record with 2 or more).")] = None,
    temperature: Temperature = 0.5, top_p: TopP = 1.0, max_tokens: MaxTokens = 128,
    seed: Seed = 0, layer: Layer = None, alpha: Alpha = Settings.alpha, target: Target = None,
    teacher: Teacher = Settings.teacher, base_url: BaseUrl = None, api_key_env: ApiKeyEnv = None,
    no_cache: NoCache = False, cache_dir: CacheDir = None, concurrency: Concurrency = 16,
    device: Device = "auto", dtype: Dtype = "auto", token_budget: TokenBudget = 16384,
    retry_budget: RetryBudget = Settings.retry_budget,
    group_size: Annotated[int, typer.Option("--group-size", help="Records per shared teacher pass.")] = 8,
    save_matrix: Annotated[bool, typer.Option("--save-matrix", help="Add D to every output line.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 if any record had an error.")] = False,
    calibration: CalibrationFile = None,
    engine: Annotated[Engine, typer.Option("--engine", help="local: this process; ray: a Ray cluster (needs the "
                                           "'ray' extra), same output.")] = Engine.local,
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", help="Ray cluster for --engine ray "
                                                       "(default: $RAY_ADDRESS, else a new local one).")] = None,
) -> None:
    """Score a JSONL log, one output line per input line; records with fewer than K responses are topped up from --target."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from blackbox_wd.batch import BatchRunner, check_group_size, check_output_path, plan_k, read_done
    from blackbox_wd.calibration import Calibration
    from blackbox_wd.pipeline import Detector

    quiet_libraries()
    if not logs.is_file():
        raise BBWDError(f"input file not found: {logs}")
    if ray_address is not None and engine is not Engine.ray:
        raise BBWDError("--ray-address needs --engine ray")
    check_group_size(group_size)
    check_output_path(output)
    read_done(output)  # not bbwd output: refused before any model loads
    sample_missing = target is not None
    k, k_source = plan_k(logs, k, sample_missing)
    settings = settings_from(locals())
    cal = Calibration.load(calibration) if calibration else None
    err = Console(stderr=True)
    if engine is Engine.ray:
        from blackbox_wd.ray_engine import RayRunner, ray_cluster

        cluster = ray_cluster(ray_address)
    else:
        cluster = contextlib.nullcontext()
    with cluster:
        runner = RayRunner(settings, sample_missing, group_size, calibration=cal) if engine is Engine.ray else \
            BatchRunner(Detector.from_settings(settings, cal), sample_missing, group_size=group_size)
        with Progress(TextColumn("[bold]bbwd batch"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[rate]:.2f} rec/s, {task.fields[errors]} errors"),
                      TimeElapsedColumn(), console=err, disable=not err.is_terminal) as bar:
            task = bar.add_task("score", total=None, rate=0.0, errors=0)

            def progress(done: int, errors: int) -> None:
                elapsed = bar.tasks[0].elapsed or 1e-9
                bar.update(task, completed=done, rate=done / elapsed, errors=errors)

            summary = asyncio.run(runner.run(logs, output, save_matrix, progress))
    summary.k_source = k_source
    err.print(summary.line(), highlight=False, soft_wrap=True)
    if strict and summary.errors:
        raise typer.Exit(1)


@app.command("eval")
def evaluate(
    data: Annotated[str, typer.Option("--data", help="Dataset JSONL (../shared/data format) or a short name: nq, sciq, squad, math500.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Report folder.")] = Path("report"),
    limit: Annotated[Optional[int], typer.Option("--limit", help="Score the first N prompts (exemplars excluded).")] = None,
    protocol: Annotated[str, typer.Option("--protocol", help="few-shot (5 exemplars of the data file as chat turns, short answers) or zero-shot. MATH is zero-shot under both.")] = "few-shot",
    label_from: Annotated[str, typer.Option("--label-from", help="Judged answer: greedy (one extra answer at temperature 0) or first (the first of the K samples).")] = "greedy",
    dse: Annotated[str, typer.Option("--dse", help="DSE judge: answer (QA: equal normalised answers; MATH: equivalent final answers), nli (needs --nli), teacher (the teacher LM's yes/no), none.")] = "answer",
    nli: Annotated[Optional[str], typer.Option("--nli", help="NLI model for --dse nli: hub id or local folder (e.g. microsoft/deberta-large-mnli).")] = None,
    require_context: Annotated[bool, typer.Option("--require-context", help="Score only records with a non-empty context (e.g. SciQ with its support).")] = False,
    k: K = 10, temperature: Temperature = 0.5, top_p: TopP = 1.0,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", help="Max new tokens per response (default 128; 512 when the data has MATH items).")] = None,
    seed: Seed = 0, layer: Layer = None, alpha: Alpha = Settings.alpha, target: Target = None,
    teacher: Teacher = Settings.teacher, base_url: BaseUrl = None, api_key_env: ApiKeyEnv = None,
    no_cache: NoCache = False, cache_dir: CacheDir = None, concurrency: Concurrency = 16,
    device: Device = "auto", dtype: Dtype = "auto", retry_budget: RetryBudget = Settings.retry_budget,
    judge: Annotated[Optional[str], typer.Option("--judge", help="Also label with an LLM judge: API preset or model name (with --judge-base-url).")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option("--judge-base-url", help="OpenAI-compatible endpoint of the judge.")] = None,
    judge_api_key_env: Annotated[Optional[str], typer.Option("--judge-api-key-env", help="Environment variable with the judge's API key.")] = None,
) -> None:
    """Score a dataset with AvgWD, EigenWD and the baselines; write results.jsonl, summary.md and plots."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    from blackbox_wd.baselines.nli import load_nli
    from blackbox_wd.eval.data import load
    from blackbox_wd.eval.report import write_report
    from blackbox_wd.eval.run import default_max_tokens, evaluate as run_eval, protocol as eval_protocol, run_fingerprint
    from blackbox_wd.pipeline import Detector

    quiet_libraries()
    try:
        dataset = load(data, protocol, limit, require_context)
    except (FileNotFoundError, ValueError) as exc:
        raise BBWDError(str(exc)) from None
    if not dataset.items:
        raise BBWDError(f"nothing to score in {data} (the few-shot protocol keeps the last 5 records of each "
                        "QA style as exemplars)")
    described = eval_protocol(dataset, label_from, dse, nli)
    max_tokens = max_tokens if max_tokens is not None else default_max_tokens(dataset.items)
    settings = settings_from(locals())
    err = Console(stderr=True)
    llm_judge = None
    if judge:
        from blackbox_wd.clients.api import make_api_sampler
        from blackbox_wd.eval.judge import LLMJudge

        llm_judge = LLMJudge(make_api_sampler(dataclasses.replace(
            settings, target=judge, base_url=judge_base_url, api_key_env=judge_api_key_env)))
    detector = Detector.from_settings(settings)
    nli_model = load_nli(nli, detector.teacher.device) if nli else None
    with Progress(TextColumn("[bold]bbwd eval"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[rate]}, {task.fields[errors]} errors"), TimeElapsedColumn(),
                  TextColumn("ETA"), TimeRemainingColumn(), console=err, disable=not err.is_terminal,
                  speed_estimate_period=3600) as bar:
        task = bar.add_task("eval", total=len(dataset.items), rate="", errors=0)
        start = {"done": 0, "errors": 0}

        def progress(done: int, row: dict | None) -> None:
            if row is None:  # the rows an earlier run left
                start["done"] = done
                bar.reset(task, completed=done)
                return
            start["errors"] += "error" in row
            new, elapsed = done - start["done"], bar.tasks[0].elapsed or 1e-9
            bar.update(task, completed=done, rate=f"{elapsed / new:.1f} s/prompt", errors=start["errors"])

        rows = run_eval(detector, dataset, output, label_from=label_from, dse=dse, nli=nli_model, judge=llm_judge,
                        progress=progress)
    scored = [r for r in rows if "error" not in r]
    reported = {**detector.reported_settings(), "fingerprint": run_fingerprint(detector, described), "data": data,
                "protocol": described, "prompts": len(scored), "errors": len(rows) - len(scored),
                "label_judge": judge or "none"}
    if not scored:
        raise BBWDError(f"every prompt failed, see {output / 'results.jsonl'}")
    paths = write_report(scored, output, settings=reported, title=f"Hallucination detection on {Path(data).name}")
    err.print(f"wrote {output / 'results.jsonl'} ({len(scored)} prompts scored, {len(rows) - len(scored)} errors), "
              + ", ".join(str(p) for p in paths.values()), highlight=False)


@app.command()
def calibrate(
    results: Annotated[Path, typer.Argument(help="Labelled JSONL: bbwd eval's results.jsonl, or rows with avg_wd, "
                                                 "eigen_wd and a 0/1 label (1 = hallucination).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Calibration file to write; the report "
                                         "(<name>.md, <name>.reliability.png) goes beside it.")] = Path("calibration.json"),
    label: Annotated[str, typer.Option("--label", help="Label field: label, label_em, label_judge, ...")] = "label",
    settings_from: Annotated[Optional[Path], typer.Option(
        "--settings-from", help="The rows' reported settings (JSON object); default: settings.json beside RESULTS, "
                                "which bbwd eval writes.")] = None,
    target_fpr: Annotated[Optional[float], typer.Option(
        "--target-fpr", help="Threshold: the smallest whose cross-validated FPR is at most this (default 0.1).")] = None,
    max_f1: Annotated[bool, typer.Option("--max-f1", help="Threshold: the one of maximum F1 instead.")] = False,
    with_baselines: Annotated[bool, typer.Option(
        "--with-baselines", help="Also report the combined score with the baselines (not applied).")] = False,
    folds: Annotated[int, typer.Option("--folds", help="Cross-validation folds (stratified).")] = 5,
) -> None:
    """Fit a calibration (probability of hallucination and a flag) on labelled results, with a report."""
    from blackbox_wd.batch import check_output_path
    from blackbox_wd.calibration.fit import fit_file
    from blackbox_wd.calibration.report import summary_line, write_report

    if max_f1 and target_fpr is not None:
        raise BBWDError("give --target-fpr or --max-f1, not both")
    check_output_path(output)
    fit = fit_file(results, label=label, settings_from=settings_from, folds=folds,
                   target_fpr=0.1 if target_fpr is None else target_fpr, max_f1=max_f1, with_baselines=with_baselines)
    fit.calibration.save(output)
    paths = write_report(fit, output)
    typer.echo(f"wrote {output}, {paths['report']}, {paths['reliability']}: {summary_line(fit)}", err=True)


SERVE_MODULES = {"fastapi", "starlette", "uvicorn", "prometheus_client", "pydantic"}


@app.command()
def serve(
    k: K = 10, temperature: Temperature = 0.5, top_p: TopP = 1.0, max_tokens: MaxTokens = 128,
    seed: Seed = 0, layer: Layer = None, alpha: Alpha = Settings.alpha, target: Target = None,
    teacher: Teacher = Settings.teacher, base_url: BaseUrl = None, api_key_env: ApiKeyEnv = None,
    no_cache: NoCache = False, cache_dir: CacheDir = None, concurrency: Concurrency = 16,
    device: Device = "auto", dtype: Dtype = "auto", token_budget: TokenBudget = 16384,
    retry_budget: RetryBudget = Settings.retry_budget,
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8080,
    server_key_env: Annotated[Optional[str], typer.Option("--server-key-env", help="Environment variable holding the bearer token clients must send (needed to bind a non-loopback address).")] = None,
    calibration: Annotated[Optional[Path], typer.Option("--calibration", help="Calibration file: adds p_hallucination and flag to every verdict.")] = None,
    max_body_bytes: Annotated[int, typer.Option("--max-body-bytes", help="Largest request body accepted (413 above).")] = 4 * 1024 * 1024,
    batch_wait_ms: Annotated[float, typer.Option("--batch-wait-ms", help="How long a lone request waits for others to share its teacher pass.")] = 5.0,
) -> None:
    """Serve an OpenAI-compatible /v1/chat/completions that answers every call and adds its bbwd verdict."""
    try:
        from blackbox_wd.serve.app import ServeOptions, run
    except ModuleNotFoundError as exc:
        if exc.name not in SERVE_MODULES:
            raise
        raise BBWDError(f"bbwd serve needs the 'serve' extra ({exc.name} is missing): "
                        "pip install 'blackbox-wd[serve]'") from None

    quiet_libraries()
    settings = settings_from(locals())
    run(settings, ServeOptions(host=host, port=port, server_key_env=server_key_env, calibration=calibration,
                               max_body_bytes=max_body_bytes, batch_wait_ms=batch_wait_ms))


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
        typer.echo(f"error: unexpected {type(exc).__name__}: {one_line(exc)} (set BBWD_DEBUG=1 for the traceback)",
                   err=True)
        code = 1
    sys.exit(code or 0)
