"""The `bbwd` command line: parses options and delegates; errors become one line, exit code 2."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from blackbox_wd.errors import BBWDError
from blackbox_wd.pipeline import Result, Settings

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Training-free hallucination detection with Wasserstein distances of teacher states.")


@app.callback()
def _root() -> None:
    """bbwd: score prompts, JSONL logs and datasets for hallucination."""


def quiet_libraries() -> None:
    """Keep transformers' progress bars and warnings off the terminal: bbwd reports what it did."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def fail(message: str) -> None:
    """Print one error line to stderr and exit with code 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def render(result: Result, console: Console) -> None:
    """Human-readable table of responses, D and scores."""
    table = Table(title="Responses", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("response")
    for i, (text, n) in enumerate(zip(result.responses, result.token_counts)):
        table.add_row(str(i), str(n), text.replace("\n", " ")[:120])
    console.print(table)
    dmat = Table(title="D = W2 between token-state measures")
    dmat.add_column("")
    for j in range(len(result.responses)):
        dmat.add_column(str(j), justify="right")
    for i, row in enumerate(result.D):
        dmat.add_row(str(i), *(f"{v:.2f}" for v in row))
    console.print(dmat)
    s = result.settings
    console.print(f"[bold]AvgWD[/bold]   {result.avg_wd:.6g}")
    console.print(f"[bold]EigenWD[/bold] {result.eigen_wd:.6g}   (p={s['p']}, alpha={s['alpha']}, bandwidth={s['bandwidth']:.4g})")
    console.print(f"target={s['target']} teacher={s['teacher']} layer={s['layer']}/{s['n_layers']} "
                  f"K={s['k']} T={s['temperature']} top_p={s['top_p']} seed={s['seed']} device={s['device']}")
    u = result.usage
    if u.requests or u.cache_hits:
        console.print(f"API: {u.requests} requests, {u.cache_hits} from cache, {u.retries} retries, "
                      f"{u.completion_tokens} completion tokens fresh, {u.cached_completion_tokens} cached")


TeacherOpt = Annotated[str, typer.Option("--teacher", help="Teacher model: registry name, hub id, folder or .gguf.")]
TargetOpt = Annotated[Optional[str], typer.Option("--target", help="Target model (API preset, served model name, or local); default: the teacher (white-box).")]


@app.command()
def score(
    prompt: Annotated[str, typer.Argument(help="The prompt to score.")],
    k: Annotated[int, typer.Option("-k", "--k", help="Number of sampled responses.")] = 10,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.5,
    top_p: Annotated[float, typer.Option("--top-p", help="Nucleus sampling mass.")] = 1.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Max new tokens per response.")] = 128,
    seed: Annotated[Optional[int], typer.Option(help="Sampling seed.")] = 0,
    layer: Annotated[Optional[int], typer.Option(help="Teacher layer (default floor(L/2)).")] = None,
    alpha: Annotated[float, typer.Option(help="EigenWD diagonal shift.")] = Settings.alpha,
    target: TargetOpt = None,
    teacher: TeacherOpt = Settings.teacher,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint for the target.")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="Environment variable holding the API key.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the API response cache.")] = False,
    cache_dir: Annotated[Optional[str], typer.Option("--cache-dir", help="API cache directory.")] = None,
    concurrency: Annotated[int, typer.Option(help="Max API requests in flight.")] = 16,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    dtype: Annotated[str, typer.Option(help="auto, float32, bfloat16 or float16.")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Score one prompt: sample K responses, teacher-force them, print D, AvgWD and EigenWD."""
    from blackbox_wd.pipeline import Detector, as_messages

    quiet_libraries()
    settings = Settings(teacher=teacher, target=target, k=k, temperature=temperature, top_p=top_p,
                        max_tokens=max_tokens, seed=seed, layer=layer, alpha=alpha, device=device,
                        dtype=dtype, base_url=base_url, api_key_env=api_key_env, cache=not no_cache,
                        cache_dir=cache_dir, concurrency=concurrency)
    try:
        messages = as_messages(prompt)
        result = Detector.from_settings(settings).score(messages)
    except BBWDError as exc:
        fail(str(exc))
    if as_json:
        json.dump(result.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        render(result, Console())


def main() -> None:
    """Entry point for ``python -m blackbox_wd``."""
    app()
