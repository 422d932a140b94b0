"""`bbwd batch`: a JSONL log scored (local or Ray engine), or rows it wrote judged again."""

from __future__ import annotations

import asyncio
import contextlib
import enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from blackbox_wd.doors.cli.app import (
    SETTING_DEFAULTS,
    AllScores,
    CalibrationFile,
    SamplesFrom,
    Verdict,
    app,
    calibration_choice,
    detector_from,
    parse_k,
    quiet_libraries,
    say_note,
    settings_from,
    with_settings,
)
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import JSONObject
from blackbox_wd.run.runlog import check_output_path
from blackbox_wd.settings import GROUP_SIZE, check_group_size


class EngineOption(str, enum.Enum):
    """Where ``bbwd batch`` runs."""

    local = "local"
    ray = "ray"


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
            "more), or auto: draw from --target in rounds up to --k-max and stop once the verdict is settled.",
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
    all_scores: AllScores = False,
    options: JSONObject | None = None,
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
    from blackbox_wd.doors.batch import BatchRunner, Runner, is_scored, plan_k, read_done  # torch: as score's

    if is_scored(logs):
        if all_scores:
            raise BBWDError(
                "--all-scores forces a log's rows through the teacher: scored rows are judged again with no "
                "teacher pass (give the log instead)"
            )
        return rejudge_scored(logs, output, k, options, calibration, verdict)
    sample_missing = options.get("target") is not None  # else the responses are recorded samples
    if options.get("claims") is not None and not sample_missing:
        raise BBWDError("--claims target needs --target: the model that lists the claims (a recorded log has none)")
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
        detector = detector_from(
            settings,
            choice,
            recorded=recorded,
            samples_from=samples_from,
            group_size=group_size,
            all_scores=all_scores,
            **built,
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
    if summary.teacher_line():
        err.print(summary.teacher_line(), highlight=False, soft_wrap=True)
    typer.echo(summary.settings_line(), err=True)  # JSON as it is: no markup, no wrapping
    if strict and summary.errors:
        raise typer.Exit(1)


def rejudge_scored(
    scored: Path, output: Path, k: str | None, options: JSONObject, calibration: Path | None, verdict: bool
) -> None:
    """``bbwd batch`` on rows it wrote: each judged again with the calibration (``rejudge``), nothing scored."""
    from blackbox_wd.doors.rejudge import rejudge  # torch: as score's

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
    choice = calibration_choice(calibration, verdict)
    assert choice is not None, "--no-verdict is refused above"
    summary = rejudge(scored, output, choice, base_rate=options.get("base_rate"))
    for note in summary.notes:
        say_note(note)
    typer.echo(summary.line(), err=True)
