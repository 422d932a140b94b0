"""`bbwd calibrate`: a calibration fitted on labelled rows."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import typer

from blackbox_wd.doors.cli.app import app
from blackbox_wd.errors import BBWDError
from blackbox_wd.run.runlog import check_output_path


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
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            help="Labels apart from the rows, joined to them by id: JSONL, {\"id\": ..., \"label\": 0 or 1} a line "
            "(bbwd report --suggest N's \"Download labels\"); the rows' own labels are not read.",
        ),
    ] = None,
) -> None:
    """Fit a calibration (the combined verdict: a probability of hallucination and a flag, for answers and their
    sentences) on labelled results: bbwd eval's, or bbwd batch's rows with a label added. A few labelled rows refit
    the map and threshold of the calibration that judged them; enough for a full fit, every head."""
    from blackbox_wd.doors import calibrate as door  # scikit-learn, matplotlib: seconds more on `bbwd --help`

    if suggest is not None and labels is not None:
        raise BBWDError("--suggest writes rows to label and --labels fits on labels: give one of them")
    if suggest is not None:
        output = output or Path("to_label.jsonl")
        check_output_path(output)
        typer.echo(door.write_suggestion(results, suggest, output), err=True)
        return
    output = output or Path("calibration.json")
    check_output_path(output)
    fit = door.calibrate if labels is None else functools.partial(door.calibrate_labels, labels=labels)
    line = fit(
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
