"""The `bbwd` app: the options every command shares (the Settings options, declared once), and the entry point;
each command is a module beside it. Errors become one line, exit code 2."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from blackbox_wd.adaptive import RULE
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.records import JSONObject
from blackbox_wd.settings import Settings

if TYPE_CHECKING:
    from blackbox_wd.calibration import Calibration
    from blackbox_wd.run.detector import Detector

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
AllScores = Annotated[
    bool,
    typer.Option(
        "--all-scores",
        help="Force every prompt through the teacher and give every score (D, AvgWD, EigenWD, ...); by default only "
        "prompts whose verdict reads the teacher are forced (the same p and flag), the others' W2 fields null.",
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


def calibration_choice(path: Path | None, verdict: bool) -> Calibration | str | None:
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


def detector_from(settings: Settings, choice: Calibration | str | None, **options: Any) -> Detector:
    """``Detector.from_settings``: the one builder, imported when a command scores."""
    from blackbox_wd.run.detector import Detector  # torch and transformers: seconds more on `bbwd --help`

    return Detector.from_settings(settings, choice, **options)


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


def settings_from(options: JSONObject, **own: Any) -> Settings:
    """The Settings named by a command's shared options and its own (``own``); checked."""
    return Settings(**setting_values({**options, **own}))


def setting_values(options: JSONObject) -> dict[str, Any]:
    """The Settings fields of a command's options: ``-k``/``--k-max`` become k and stop (``parse_k``)."""
    values = dict(options)
    values.update(parse_k(values.pop("k", SETTING_DEFAULTS["k"]), values.pop("k_max", None)))
    return values


def parse_k(k: str | int, k_max: int | None) -> dict[str, Any]:
    """``-k N`` (always N samples) or ``-k auto`` (rounds up to ``--k-max``) as the Settings fields k and stop."""
    if str(k).strip().lower() == "auto":
        return {"k": K_MAX if k_max is None else k_max, "stop": RULE}
    if k_max is not None:
        raise BBWDError("--k-max applies with -k auto")
    try:
        return {"k": int(k), "stop": None}
    except ValueError:
        raise BBWDError(f"k must be an integer >= 2 or auto (got {k})") from None


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
