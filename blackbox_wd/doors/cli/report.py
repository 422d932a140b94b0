"""`bbwd report`: one self-contained HTML page of a scored log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from blackbox_wd.doors.cli.app import app


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
    suggest: Annotated[
        int | None,
        typer.Option(
            "--suggest",
            help="A labelling mode: the N rows bbwd calibrate --suggest N picks first, then the others by risk; keys "
            "h (hallucinated), c (correct), s (skip), u (undo); \"Download labels\" saves labels.jsonl for bbwd "
            "calibrate --labels.",
        ),
    ] = None,
) -> None:
    """Write one self-contained HTML page of scored rows: counts, calibration, risk chart, rows table, details."""
    from blackbox_wd.doors.report.page import write_report

    done = write_report(scores, output, log, calibration, warn=lambda line: typer.echo(line, err=True), suggest=suggest)
    typer.echo(
        f"{done.path}: {done.rows} rows, {done.flagged} flagged, {done.errors} errors, {done.bytes:,} bytes", err=True
    )
