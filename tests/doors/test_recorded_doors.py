"""Recorded samples through every door: ``bbwd batch`` without ``--target``, ``bbwd eval`` on a recorded file and the
Python API (``Detector.from_settings(..., recorded=True)``) give the same row for the same record, under the same
reported settings (target "recorded", no sampler, no sampling settings, ``samples_from``) and the black-box
calibration; a record short of K is an error, and ``--samples-from`` is refused where nothing is recorded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from cli_support import jsonl, run_cli

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS
from blackbox_wd.errors import BBWDError
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings, fingerprint

ORIGIN = "gpt-4o-mini at T=1.0"
FIXTURE = str(Path(__file__).resolve().parents[2] / "fixtures" / "tiny_qa.jsonl")  # not recorded: drawn here
K = 10
SHORT = ["4", "Four.", "4."]  # fewer than K: an error at every door
RECORDS = [
    {
        "id": "r1",
        "source": "t",
        "prompt": "Who wrote Middlemarch?",
        "answers": ["George Eliot"],
        "response": "George Eliot wrote it. She published it in 1871.",
        "samples": [
            "George Eliot.",
            "George Eliot.",
            "It was George Eliot.",
            "Mary Ann Evans, as George Eliot.",
            "George Eliot.",
            "Charles Dickens.",
            "George Eliot wrote it.",
            "Eliot.",
            "George Eliot.",
            "Thomas Hardy.",
            "Jane Austen.",  # the 11th: every door scores the first K
        ],
        "claims": [
            {"text": "George Eliot wrote Middlemarch.", "label": "supported"},
            {"text": "Middlemarch was published in 1871.", "label": "supported"},
        ],
        "label": 0,
    },
    {
        "id": "r2",
        "source": "t",
        "prompt": "What is the capital of Australia?",
        "answers": ["Canberra"],
        "response": "Sydney is the capital. It was founded in 1788.",
        "samples": [
            "Canberra.",
            "Sydney.",
            "Melbourne.",
            "Canberra.",
            "Sydney is the capital.",
            "Canberra, since 1913.",
            "Perth.",
            "Canberra.",
            "Sydney.",
            "Brisbane.",
        ],
        "claims": [{"text": "Sydney is the capital of Australia.", "label": "unsupported"}],
        "label": 1,
    },
    {
        "id": "r3",
        "source": "t",
        "prompt": "What is 2+2?",
        "answers": ["4"],
        "response": "4",
        "samples": SHORT,
        "label": 0,
    },
]
# the fields every door gives a scored record, by the batch row's names
NUMBERS = (
    "avg_wd",
    "eigen_wd",
    "eigen_wd_fixed",
    "answer_wd",
    "sentence_wd",
    "answer_unigram",
    "answer_disagreement",
    "p_hallucination",
)
BASELINES = ("ls", "es", "er", "dse")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The recorded file: each record's samples both as eval reads them (``samples``) and as batch reads them
    (``responses``)."""
    path = tmp_path_factory.mktemp("recorded") / "recorded.jsonl"
    path.write_text("".join(json.dumps({**r, "responses": r["samples"]}) + "\n" for r in RECORDS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def batch(data):
    """``bbwd batch`` with no --target: (rows, stderr)."""
    out = data.parent / "batch.jsonl"
    code, err = run_cli("batch", str(data), "-o", str(out), "--device", "cpu", "-k", str(K), "--samples-from", ORIGIN)
    assert code == 0, err
    return jsonl(out), err


@pytest.fixture(scope="module")
def evaluated(data):
    """``bbwd eval`` on the recorded file (LNE off, as batch and the API run it): (rows, settings.json)."""
    out = data.parent / "eval"
    args = ("eval", "--data", str(data), "-o", str(out), "--device", "cpu", "--no-lne", "--no-cache")
    code, err = run_cli(*args, "--samples-from", ORIGIN)
    assert code == 0, err
    return jsonl(out / "results.jsonl"), json.loads((out / "settings.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def detector():
    return Detector.from_settings(Settings(device="cpu"), recorded=True, samples_from=ORIGIN)


@pytest.fixture(scope="module")
def api(detector):
    """The Python API's result of each record that has K samples."""
    return [
        detector.score(
            r["prompt"], responses=r["samples"], answer=r["response"], claims=[c["text"] for c in r["claims"]]
        ).to_dict()
        for r in RECORDS
        if len(r["samples"]) >= K
    ]


def settings_of(stderr: str) -> dict:
    """The reported settings a batch run says on stderr."""
    line = next(x for x in stderr.splitlines() if x.startswith("settings: "))
    return json.loads(line.removeprefix("settings: "))


def shared(row: dict, baselines: dict) -> dict:
    """The fields the doors share, as the batch row names them."""
    return {
        **{name: row[name] for name in NUMBERS},
        "baselines": {name: baselines[name] for name in BASELINES},
        "sentences": row["sentences"],
        "claims": row["claims"],
        "flag": row["flag"],
        "members": row["members"],
        "n_samples": row["n_samples"],
    }


def assert_close(a, b, path="row"):
    """Equal structures, numbers to 1e-6 relative or 1e-4 absolute: the API forces one record a pass, batch and eval
    a group, so that a W2 cost of (nearly) 0, a sentence that is one of the samples, is float noise."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-4), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            assert_close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_close(x, y, f"{path}[{n}]")
    else:
        assert a == b, path


@pytest.mark.slow
def test_batch_eval_and_the_api_give_the_same_row(batch, evaluated, api, detector):
    rows, stderr = batch
    eval_rows, eval_settings = evaluated
    scored = [r for r in rows if r["error"] is None]
    assert [r["id"] for r in scored] == [r["id"] for r in eval_rows if "error" not in r] == ["r1", "r2"]
    by_batch = [shared(r, r["baselines"]) for r in scored]
    by_eval = [shared(r, r) for r in eval_rows if "error" not in r]
    by_api = [shared({**r, "members": r["calibration"]["members"]}, r["baselines"]) for r in api]
    assert all(r["n_samples"] == K for r in by_batch)  # the first K of r1's 11
    assert all(r["p_hallucination"] is not None and len(r["sentences"]) == 2 for r in by_batch)
    # each claim scored, and judged by the API file's claim head: "Sydney is the capital of Australia." has one key
    # word, "sydney" (the others are the prompt's or function words), which 7 of the 10 samples lack
    assert [[c["text"] for c in r["claims"]] for r in by_batch] == [
        [c["text"] for c in r["claims"]] for r in RECORDS[:2]
    ]
    assert all(c["p_hallucination"] is not None and c["flag"] is not None for r in by_batch for c in r["claims"])
    assert by_batch[1]["claims"][0]["score"] == pytest.approx(0.7)
    assert [r["claim_labels"] for r in eval_rows if "error" not in r] == [["supported", "supported"], ["unsupported"]]
    assert_close(by_eval, by_batch, "eval")
    assert_close(by_api, by_batch, "api")
    assert [r["responses"] for r in eval_rows if "error" not in r] == [r["responses"] for r in api]

    # one fingerprint: the batch rows', the API's, and eval's once its protocol is left out
    reported = settings_of(stderr)
    assert {r["fingerprint"] for r in rows} == {reported["fingerprint"]} == {r["settings"]["fingerprint"] for r in api}
    assert detector.fingerprint == reported["fingerprint"]
    without_protocol = {k: v for k, v in eval_settings.items() if k not in ("protocol", "fingerprint")}
    assert fingerprint(without_protocol) == reported["fingerprint"]
    assert {r["fingerprint"] for r in eval_rows} == {eval_settings["fingerprint"]}
    # the same reported settings at each door (eval's with its cache off, which changes no score)
    assert {k: v for k, v in api[0]["settings"].items() if k != "bandwidth"} == reported
    assert {**without_protocol, "cache": True} == {k: v for k, v in reported.items() if k != "fingerprint"}


@pytest.mark.slow
def test_batch_without_target_reports_recorded_samples_and_the_api_calibration(batch):
    rows, stderr = batch
    reported = settings_of(stderr)
    assert (reported["target"], reported["white_box"], reported["sampler"], reported["endpoint"]) == (
        "recorded",
        False,
        None,
        None,
    )
    assert [reported[name] for name in ("temperature", "top_p", "max_tokens", "seed")] == [None] * 4
    assert reported["samples_from"] == ORIGIN
    shipped = Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.api.json")
    assert {r["calibration"] for r in rows} == {shipped.id}
    assert "note:" not in stderr  # fitted on recorded samples at these settings: it applies as fitted
    assert f"K={K} responses each (-k)" in stderr


@pytest.mark.slow
def test_a_record_short_of_k_is_an_error_at_every_door(batch, evaluated, detector):
    rows, _ = batch
    assert rows[2]["error"] == (
        f"line 3: field 'responses' has {len(SHORT)} response(s); every record of this run is scored on K={K} "
        "and there is no --target to sample more"
    )
    assert rows[2]["avg_wd"] is None and rows[2]["p_hallucination"] is None
    eval_rows, _ = evaluated
    assert eval_rows[2]["id"] == "r3" and f"field 'samples' has {len(SHORT)} sample(s)" in eval_rows[2]["error"]
    with pytest.raises(BBWDError, match=rf"^{len(SHORT)} recorded response\(s\) given; .* K={K} ") as info:
        detector.score("What is 2+2?", responses=SHORT)
    assert "\n" not in str(info.value)
    with pytest.raises(BBWDError, match=r"^0 recorded response\(s\) given"):
        detector.score("What is 2+2?")


@pytest.mark.slow
def test_the_api_reports_recorded_samples(detector, api):
    settings = api[0]["settings"]
    assert (settings["target"], settings["sampler"], settings["temperature"], settings["samples_from"]) == (
        "recorded",
        None,
        None,
        ORIGIN,
    )
    assert math.isfinite(settings["bandwidth"])
    assert api[0]["calibration"]["origin"] == "embedded smollm2-135m.api.json"
    assert detector.calibration_note is None


def test_samples_from_is_not_a_score_setting():
    """Who drew the samples is said, not hashed: stored fingerprints and calibrations still hold."""
    from blackbox_wd.settings import ReportedSettings
    from blackbox_wd.teachers.hf import load_card

    card = load_card("smollm2-135m", None)
    said = ReportedSettings.of(Settings(), card, None, "cpu", recorded=True, samples_from=ORIGIN).as_dict()
    unsaid = ReportedSettings.of(Settings(), card, None, "cpu", recorded=True).as_dict()
    assert said["samples_from"] == ORIGIN and unsaid["samples_from"] is None
    assert said["fingerprint"] == unsaid["fingerprint"]
    drawn = ReportedSettings.of(Settings(), card, None, "cpu", sampler="llama.cpp").as_dict()
    assert "samples_from" not in drawn


def test_samples_from_needs_recorded_samples(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"prompt": "hi"}\n', encoding="utf-8")
    code, err = run_cli(
        "batch", str(src), "-o", str(tmp_path / "o.jsonl"), "--target", "smollm2-135m", "--samples-from", ORIGIN
    )
    assert code == 2 and err.strip().count("\n") == 0
    assert err.startswith("error: --samples-from says who drew recorded samples: with --target the samples are drawn")
    assert not (tmp_path / "o.jsonl").exists()
    code, err = run_cli("eval", "--data", FIXTURE, "-o", str(tmp_path / "ev"), "--samples-from", ORIGIN)
    assert code == 2 and err.strip().count("\n") == 0
    assert err.startswith(f"error: --samples-from says who drew recorded samples: {FIXTURE} carries none")
    with pytest.raises(BBWDError, match=r"^samples_from says who drew recorded samples: it needs recorded=True$"):
        Detector.from_settings(Settings(), samples_from=ORIGIN)
