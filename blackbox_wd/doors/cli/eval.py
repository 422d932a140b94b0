"""`bbwd eval`: a labelled data set scored and its AUROC reported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from blackbox_wd.doors.cli.app import (
    CalibrationFile,
    SamplesFrom,
    Verdict,
    app,
    calibration_choice,
    quiet_libraries,
    setting_values,
    with_settings,
)
from blackbox_wd.records import JSONObject


@app.command("eval")
@with_settings(skip=("token_budget", "claims"))
def eval_command(
    data: Annotated[
        str,
        typer.Option(
            "--data",
            help="Dataset JSONL (the data README's format), or a short name (nq, sciq, squad, math500) looked up "
            "in $BBWD_DATA_DIR, else the current directory.",
        ),
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
    labeller: Annotated[
        str | None,
        typer.Option("--judge", help="Also label with an LLM judge: API preset or model name (with --judge-base-url)."),
    ] = None,
    labeller_base_url: Annotated[
        str | None, typer.Option("--judge-base-url", help="OpenAI-compatible endpoint of the judge.")
    ] = None,
    labeller_api_key_env: Annotated[
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
    options: JSONObject | None = None,
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
            labeller=labeller,
            labeller_base_url=labeller_base_url,
            labeller_api_key_env=labeller_api_key_env,
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
