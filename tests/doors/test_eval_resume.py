"""`bbwd eval` resumes only its own rows: same fingerprint, same input records; transient errors are redone."""

from __future__ import annotations

import json

import pytest

from blackbox_wd.doors.eval.run import done_rows
from blackbox_wd.errors import BBWDError
from blackbox_wd.run.runlog import RunLog

HASHES = {"a": "1" * 16, "b": "2" * 16, "c": "3" * 16}


def rows_file(tmp_path, rows, tail=""):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return path


def row(id_, fp="f" * 16, **extra):
    return {"id": id_, "fingerprint": fp, "input_hash": HASHES[id_], **extra}


def test_keeps_own_rows_marks_transient_errors_for_a_retry_and_cuts_a_torn_tail(tmp_path):
    path = rows_file(
        tmp_path,
        [
            row("a", avg_wd=1.0),
            row("b", error="HTTP 503", transient=True),
            row("c", error="line: bad", transient=False),
        ],
        tail='{"id": "x", "fing',
    )
    kept = done_rows(path, "f" * 16, HASHES)
    assert [r["id"] for r in kept] == ["a", "b", "c"]
    assert [r["id"] for r in RunLog.transient(kept)] == ["b"]  # recomputed in place, as batch does
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "rows,message",
    [
        ([row("a", fp="e" * 16)], "was written with other settings"),
        ([{**row("a"), "input_hash": "9" * 16}], "comes from another input"),
        ([{"id": "zz", "fingerprint": "f" * 16, "input_hash": "0" * 16}], "comes from another input"),
        ([{"id": "a", "avg_wd": 1.0}], "is not a bbwd eval row"),
    ],
)
def test_refuses_other_runs_and_leaves_the_file(tmp_path, rows, message):
    path = rows_file(tmp_path, rows)
    before = path.read_bytes()
    with pytest.raises(BBWDError, match=message):
        done_rows(path, "f" * 16, HASHES)
    assert path.read_bytes() == before


QUESTIONS = [
    "What is the capital of France?",
    "Who wrote Hamlet?",
    "What is the largest planet?",
    "What is the chemical symbol of gold?",
    "Who painted the Mona Lisa?",
    "What is the boiling point of water?",
    "What is the capital of Japan?",
    "Who was the first man on the moon?",
    "What is the smallest prime?",
    "What gas do plants absorb?",
    "What is the capital of Italy?",
    "Who wrote 1984?",
]  # groups of 8 and 4


@pytest.mark.slow
def test_eval_killed_with_kill_9_and_rerun_equals_an_uninterrupted_run(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    data = tmp_path / "qa.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"q{n}", "question": q, "answers": ["x"], "source": "t"}) + "\n"
            for n, q in enumerate(QUESTIONS)
        )
    )
    args = [
        sys.executable,
        "-m",
        "blackbox_wd",
        "eval",
        "--data",
        str(data),
        "--protocol",
        "zero-shot",
        "-k",
        "2",
        "--max-tokens",
        "6",
        "--device",
        "cpu",
    ]

    def rows(folder):
        return [
            {k: v for k, v in json.loads(line).items() if k != "timings"}
            for line in (folder / "results.jsonl").read_text().splitlines()
        ]

    full, crashed = tmp_path / "full", tmp_path / "crashed"
    # each run its own teacher-state cache: the crashed run's rerun reads only what its killed start stored
    subprocess.run(
        [*args, "-o", str(full), "--cache-dir", str(tmp_path / "cache-full")],
        check=True,
        capture_output=True,
        timeout=600,
    )
    args = [*args, "--cache-dir", str(tmp_path / "cache-crashed")]
    p = subprocess.Popen([*args, "-o", str(crashed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results, deadline = crashed / "results.jsonl", time.time() + 600
    while time.time() < deadline and (not results.exists() or results.read_bytes().count(b"\n") < 1):
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    with open(results, "a") as f:
        f.write('{"id": "q9", "sou')  # a torn last line, as a crash mid-write leaves it
    n_before = len(
        done_rows(
            results,
            json.loads(results.read_text().splitlines()[0])["fingerprint"],
            {
                f"q{n}": json.loads(line)["input_hash"]
                for n, line in enumerate((full / "results.jsonl").read_text().splitlines())
            },
        )
    )
    assert 1 <= n_before < len(QUESTIONS), "the kill must land mid-run"
    subprocess.run([*args, "-o", str(crashed)], check=True, capture_output=True, timeout=600)
    assert rows(crashed) == rows(full)
