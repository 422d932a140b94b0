"""`bbwd --help` and argument errors start fast: the CLI imports no model, OT, NLP or plotting library (#24).

Each check runs in a new interpreter, since this one has long imported them all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "torch",
    "transformers",
    "sklearn",
    "matplotlib",
    "rouge_score",
    "nltk",
    "ot",
    "scipy",
    "ray",
    "fastapi",
    "spacy",
)

PROBE = """
import json, sys
{body}
print(json.dumps({{"code": code, "heavy": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def probe(body: str) -> dict:
    """Run ``body`` in a fresh interpreter; the exit code it sets and the heavy modules it loaded."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=body, heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def run_main(argv: list[str]) -> str:
    return (
        "from blackbox_wd.doors.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit as exc:\n    code = exc.code\n"
    )


def test_import_cli_loads_no_heavy_module() -> None:
    assert probe("import blackbox_wd.doors.cli\ncode = 0") == {"code": 0, "heavy": []}


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["score", "--help"],
        ["batch", "--help"],
        ["eval", "--help"],
        ["calibrate", "--help"],
        ["serve", "--help"],
        [],
    ],
)
def test_help_loads_no_heavy_module(argv: list[str]) -> None:
    assert probe(run_main(argv)) == {"code": 0, "heavy": []}


@pytest.mark.parametrize(
    "argv",
    [
        ["score", "-k", "1", "x"],
        ["score", "--temperature", "-1", "x"],
        ["score", "-k", "two", "x"],
        ["score"],
        ["no-such-command"],
    ],
)
def test_argument_error_loads_no_heavy_module(argv: list[str]) -> None:
    assert probe(run_main(argv)) == {"code": 2, "heavy": []}


@pytest.mark.parametrize(
    "argv",
    [
        ["score", " "],
        ["batch", "no-such-file.jsonl", "-o", "out.jsonl"],
        ["batch", "fixtures/tiny_qa.jsonl", "-o", "out.jsonl", "--ray-address", "auto"],
    ],
)
def test_input_error_found_before_the_models_loads_no_heavy_module(argv: list[str]) -> None:
    assert probe(run_main(argv)) == {"code": 2, "heavy": []}


def test_public_names_still_import() -> None:
    import blackbox_wd
    from blackbox_wd import BBWDError, Calibration, Detector, Result, Settings

    assert blackbox_wd.Detector is Detector and Settings().k == 10
    exported = {getattr(blackbox_wd, n) for n in blackbox_wd.__all__}
    assert {BBWDError, Calibration, Detector, Result, Settings} <= exported
    with pytest.raises(AttributeError):
        blackbox_wd.no_such_name  # noqa: B018


def test_scoring_path_loads_no_text_or_plotting_library() -> None:
    """`bbwd score` needs torch, transformers and POT; ROUGE (nltk), spaCy and matplotlib load where they are used."""
    got = probe("import blackbox_wd.run.detector, blackbox_wd.clients.llamacpp, blackbox_wd.calibration\ncode = 0")
    assert {"torch", "transformers", "ot"} <= set(got["heavy"])
    assert not {"rouge_score", "nltk", "spacy", "matplotlib"} & set(got["heavy"])
