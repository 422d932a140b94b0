"""`bbwd --help` and argument errors start fast: the CLI imports no model, OT, NLP or plotting library; and
a run imports what it uses, when it uses it: `bbwd score` on the embedded default loads no OpenAI client, no
math-verify, no transformers sampler, and POT (with the scikit-learn it pulls in) only when the first simplex runs.

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
    "openai",
    "math_verify",
    "xllamacpp",
)

PROBE = """
import json, sys
{body}
print(json.dumps({{"code": code, "heavy": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def probe(body: str, timeout: float = 120) -> dict:
    """Run ``body`` in a fresh interpreter; the exit code it sets and the heavy modules it loaded."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=body, heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=timeout,
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
    """Importing what `bbwd score` runs loads transformers' package (the teacher's card reads its tokenizer) and none
    of: torch and transformers' model code (loaded with a teacher's weights in torch), ROUGE (nltk), spaCy,
    matplotlib, POT and scikit-learn (loaded where a simplex runs), the OpenAI client (an API target's), math-verify
    (the math judge's)."""
    body = "import blackbox_wd.run.detector, blackbox_wd.clients.llamacpp, blackbox_wd.calibration\n"
    got = probe(body + "code = int('transformers.modeling_utils' in sys.modules)")
    assert got == {"code": 0, "heavy": ["transformers", "scipy", "xllamacpp"]}


def test_applying_a_shipped_calibration_loads_no_fitting_or_model_library() -> None:
    """A shipped calibration's verdict needs numpy (and scipy's expit): no scikit-learn, torch, POT or math-verify."""
    body = (
        "from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS, Calibration\n"
        "cal = Calibration.load(PACKAGE_CALIBRATIONS / 'smollm2-135m.json')\n"
        "v = cal.verdict({'avg_wd': 42.5, 'eigen_wd': 3.39e7, 'baselines': {'dse': 0.94}})\n"
        "code = 0 if 0 < v.p < 1 else 1"
    )
    assert probe(body) == {"code": 0, "heavy": ["scipy"]}


def test_a_local_target_imports_no_api_client_nor_the_other_sampler() -> None:
    """Choosing a local sampler imports no OpenAI client; llama.cpp's seeds import no transformers sampler."""
    body = (
        "from blackbox_wd.clients import target_kind\n"
        "from blackbox_wd.clients.seeds import sample_seed\n"
        "from blackbox_wd.settings import Settings\n"
        "assert target_kind(Settings()) == 'white-box' and sample_seed(0, [], 0) >= 0\n"
        "code = int(any(m in sys.modules for m in ('blackbox_wd.clients.api', 'blackbox_wd.clients.local')))"
    )
    got = probe(body)
    assert got["code"] == 0 and "openai" not in got["heavy"] and "xllamacpp" not in got["heavy"]


ONLY_WHEN_USED = ("sklearn", "ot", "openai", "math_verify", "spacy", "matplotlib", "ray", "fastapi", "torch")
SCORE = """
import math
from blackbox_wd.measure.transport import REPLICATE_MAX
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.array_forcing import ArrayTeacher
detector = Detector.from_settings(Settings(k=4, max_tokens=24, seed=7, device="cpu"), one_prompt=True)
loaded = lambda: [m for m in {names!r} if m in sys.modules]
built = loaded()
result = detector.score("What is the capital of Australia?")
n = result.token_counts
large = any(math.lcm(a, b) > REPLICATE_MAX for i, a in enumerate(n) for b in n[i + 1 :] if a != b)
ok = result.p_hallucination is not None and detector.sampler.name == "llama.cpp" and len(set(n)) > 1
code = {{"ok": ok, "numpy": isinstance(detector.teacher, ArrayTeacher), "built": built, "scored": loaded(),
         "large": large}}
"""


@pytest.mark.slow
def test_score_on_the_embedded_default_loads_what_it_uses_when_it_uses_it() -> None:
    """Building `bbwd score`'s detector on the embedded default (llama.cpp sampler, the SmolLM2 teacher forced in
    numpy, the shipped calibration) loads no torch, scikit-learn, POT, OpenAI client, math-verify nor transformers
    sampler; scoring a prompt whose responses differ in length (so that unequal pairs are solved) loads POT, with
    the torch and scikit-learn it pulls in, only where a pair's common size is over ``REPLICATE_MAX``."""
    own = (
        "blackbox_wd.clients.api",
        "blackbox_wd.clients.local",
        "blackbox_wd.signals.baselines.entailment",
        "transformers.modeling_utils",
    )
    got = probe(SCORE.format(names=ONLY_WHEN_USED + own), timeout=600)["code"]
    assert got["ok"] and got["numpy"], got
    assert got["built"] == []
    assert set(got["scored"]) == ({"ot", "sklearn", "torch"} if got["large"] else set()), got


SHORT_LOG = """
import pathlib, tempfile
from blackbox_wd.doors.cli import main
folder = pathlib.Path(tempfile.mkdtemp())
(folder / "log.jsonl").write_text("".join(open("fixtures/report_log.jsonl").readlines()[:8]))
try:
    main(["batch", str(folder / "log.jsonl"), "-o", str(folder / "out.jsonl")])
except SystemExit as exc:
    assert not exc.code, exc.code
rows = (folder / "out.jsonl").read_text().splitlines()
code = [len(rows)] + [m for m in {names!r} if m in sys.modules]
"""


def test_a_log_of_short_answers_imports_no_torch_nor_nltk() -> None:
    """`bbwd batch` of 8 recorded short answers, whose verdict reads the texts alone, never loads the teacher: it
    imports no torch and no transformers model code (the bundled teacher's card reads its tokenizer without
    AutoTokenizer; the weights' modules load with the weights; no GPU driver, no torch asked), no nltk (ROUGE's Porter
    stems are bbwd's own, ``signals.answers.porter``), no scikit-learn and no POT."""
    names = ("torch", "transformers.modeling_utils", "blackbox_wd.teachers.forcing", "nltk", "sklearn", "ot", "pandas")
    assert probe(SHORT_LOG.format(names=names), timeout=300)["code"] == [8]
