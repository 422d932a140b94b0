"""`bbwd serve`: an OpenAI-compatible endpoint that answers and scores every call."""

from __future__ import annotations

from typing import Annotated

import typer

from blackbox_wd.doors.cli.app import (
    AllScores,
    CalibrationFile,
    Verdict,
    app,
    calibration_choice,
    quiet_libraries,
    settings_from,
    with_settings,
)
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import JSONObject

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
    all_scores: AllScores = False,
    options: JSONObject | None = None,
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
            all_scores=all_scores,
        ),
    )
