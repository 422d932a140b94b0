"""Settings are checked when made, every CLI failure is one line, and the fingerprint hashes what changes a score."""

from __future__ import annotations

import json

import pytest
from conftest import break_teacher_pass_on

from blackbox_wd.doors.cli import main
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import SCORE_FIELDS, Settings, fingerprint


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("k", 0, "k must be at least 2 (got 0)"),
        ("k", 1, "k must be at least 2 (got 1)"),
        ("top_p", 0.0, "top_p must be in (0, 1] (got 0.0)"),
        ("top_p", 1.5, "top_p must be in (0, 1] (got 1.5)"),
        ("temperature", -1.0, "temperature must be a number >= 0 (got -1.0)"),
        ("temperature", float("nan"), "temperature must be a number >= 0 (got nan)"),
        ("max_tokens", 0, "max_tokens must be an integer >= 1 (got 0)"),
        ("concurrency", 0, "concurrency must be an integer >= 1 (got 0)"),
        ("token_budget", 0, "token_budget must be an integer >= 1 (got 0)"),
        ("alpha", -1e-3, "alpha must be a number >= 0 (got -0.001)"),
        ("p", 0.0, "p must be a number > 0 (got 0.0)"),
        ("seed", -1, "seed must be an integer >= 0 (got -1)"),
        ("layer", 0, "layer must be an integer >= 1 (got 0)"),
        ("dtype", "int8", "dtype must be one of auto, float32, bfloat16, float16 (got int8)"),
        ("retry_budget", -5.0, "retry_budget must be a number of seconds >= 0 (got -5.0)"),
    ],
)
def test_settings_out_of_range_are_refused(field, value, message):
    with pytest.raises(BBWDError) as err:
        Settings(**{field: value})
    assert str(err.value).startswith(message)


def run_cli(argv, capsys):
    """Run ``bbwd`` in this process; (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as done:
        main(argv)
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["batch", "IN", "-o", "OUT", "--group-size", "0"], "error: group_size must be an integer >= 1 (got 0)"),
        (["batch", "IN", "-o", "OUT", "--top-p", "0"], "error: top_p must be in (0, 1] (got 0.0)"),
        (["batch", "IN", "-o", "OUT", "--top-p", "1.5"], "error: top_p must be in (0, 1] (got 1.5)"),
        (["batch", "IN", "-o", "OUT", "--temperature", "-1"], "error: temperature must be a number >= 0 (got -1.0)"),
        (["batch", "IN", "-o", "OUT", "-k", "0"], "error: k must be at least 2 (got 0)"),
        (["batch", "IN", "-o", "OUT", "--concurrency", "0"], "error: concurrency must be an integer >= 1 (got 0)"),
        (["batch", "IN", "-o", "OUT", "--max-tokens", "0"], "error: max_tokens must be an integer >= 1 (got 0)"),
        (
            ["batch", "IN", "-o", "missing_dir/out.jsonl"],
            "error: output folder missing_dir does not exist: create it first",
        ),
        (["batch", "IN", "-o", "."], "error: output . is a folder: give a file path with -o"),
        (["batch", "nope.jsonl", "-o", "OUT"], "error: input file not found: nope.jsonl"),
        (["score", "-k", "abc", "hi"], "error: k must be an integer >= 2 or auto (got abc)"),
        (["score", "-k", "5", "--k-max", "20", "hi"], "error: --k-max applies with -k auto"),
        (
            ["score", "-k", "auto", "--k-max", "1", "hi"],
            "error: k must be at least 2 (got 1): a distance needs two responses",
        ),
        (["score"], "error: Missing argument 'prompt'."),
        (["scor", "hi"], "error: No such command 'scor'."),
        (["score", "--top-p", "0", "hi"], "error: top_p must be in (0, 1] (got 0.0)"),
        (
            ["score", "--target", "gpt-4o", "hi"],
            "error: unknown target 'gpt-4o': API presets are gpt-4o-mini, "
            "deepseek-chat; any other model behind an OpenAI-compatible endpoint "
            "needs --base-url URL",
        ),
        (["score", "--target", "org/name", "hi"], "error: unknown target 'org/name': API presets are"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "IN").write_text('{"prompt": "hi", "responses": ["a", "b"]}\n')
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(message), err
    assert not (tmp_path / "OUT").exists()  # nothing was written


def test_output_that_is_not_bbwd_output_is_left_alone(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "IN").write_text('{"prompt": "hi", "responses": ["a", "b"]}\n')
    (tmp_path / "OUT").write_text('{"prompt": "my own log"}\n{"prompt": "half a li')
    code, _, err = run_cli(["batch", "IN", "-o", "OUT"], capsys)
    assert code == 2 and err.startswith("error: OUT is not bbwd batch output (line 1 is not a bbwd row)")
    assert (tmp_path / "OUT").read_text() == '{"prompt": "my own log"}\n{"prompt": "half a li'


def test_unexpected_exception_is_one_line_with_exit_1(capsys, monkeypatch):
    import blackbox_wd.run.detector as pipeline

    def boom(*_a, **_k):
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(pipeline.Detector, "from_settings", boom)
    code, _, err = run_cli(["score", "hi"], capsys)
    assert code == 1 and err == "error: unexpected RuntimeError: something broke (set BBWD_DEBUG=1 for the traceback)\n"
    monkeypatch.setenv("BBWD_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["score", "hi"])


def test_fingerprint_hashes_exactly_the_score_fields():
    base = {name: 1 for name in SCORE_FIELDS}
    fp = fingerprint(base)
    assert len(fp) == 16 and fingerprint(dict(base)) == fp
    for name in SCORE_FIELDS:
        assert fingerprint({**base, name: 2}) != fp, name  # each one changes it
    for other in ("device", "dtype", "cache", "cache_dir", "concurrency", "token_budget", "bandwidth", "api_key_env"):
        assert fingerprint({**base, other: "x"}) == fp, other  # how a score is computed, not what it is
    assert fingerprint({**base, "seed": 7}, seed=False) == fingerprint(base, seed=False)
    assert json.loads(json.dumps(fp)) == fp


def test_an_error_while_scoring_is_one_line_and_debug_shows_its_cause(capsys, monkeypatch, tiny_llama):
    import blackbox_wd.run.detector as pipeline
    from blackbox_wd.clients.local import LocalSampler
    from blackbox_wd.teachers.forcing import HFTeacher

    teacher = HFTeacher(*tiny_llama, name="tiny")
    build = classmethod(lambda cls, s, cal=None, **options: cls(teacher, LocalSampler(teacher), s))
    monkeypatch.setattr(pipeline.Detector, "from_settings", build)
    break_teacher_pass_on(monkeypatch, "hi", "pass\nbroke")
    code, _, err = run_cli(["score", "-k", "2", "--max-tokens", "3", "--device", "cpu", "hi"], capsys)
    assert code == 2 and err.splitlines()[-1] == "error: scoring failed: RuntimeError: pass broke", err
    monkeypatch.setenv("BBWD_DEBUG", "1")
    with pytest.raises(BBWDError) as info:
        main(["score", "-k", "2", "--max-tokens", "3", "--device", "cpu", "hi"])
    assert isinstance(info.value.__cause__, RuntimeError)
