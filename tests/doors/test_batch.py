"""`bbwd batch`: every kind of bad line, input order, and kill -9 followed by a resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blackbox_wd.doors.batch import read_done
from blackbox_wd.run.inputs import parse_line

BBWD = [sys.executable, "-m", "blackbox_wd", "batch"]
COMMON = ["-k", "3", "--max-tokens", "12", "--device", "cpu", "--group-size", "4"]

GOOD_PRESAMPLED = [
    {"id": f"p{i}", "prompt": q, "responses": rs, "label": i % 2}
    for i, (q, rs) in enumerate(
        [
            ("Who wrote Hamlet?", ["William Shakespeare.", "Shakespeare wrote it.", "Christopher Marlowe."]),
            ("Capital of Japan?", ["Tokyo.", "Tokyo is the capital.", "Kyoto."]),
            ("2+2?", ["4", "Four.", "It is 4."]),
            ("Largest planet?", ["Jupiter.", "Jupiter is the largest planet."]),
            ("Boiling point of water in C?", ["100", "100 degrees Celsius.", "90 degrees."]),
            ("Author of 1984?", ["George Orwell.", "Orwell.", "Aldous Huxley."]),
            ("Chemical symbol of gold?", ["Au", "Au.", "Ag"]),
            ("Speed of light?", ["About 300,000 km/s.", "299,792 km per second.", "Roughly 3e8 m/s."]),
            ("First man on the moon?", ["Neil Armstrong.", "Buzz Aldrin.", "Armstrong, in 1969."]),
            ("Smallest prime?", ["2", "Two.", "1"]),
        ]
    )
]
GOOD_SAMPLED = [
    {"id": f"s{i}", "prompt": q}
    for i, q in enumerate(
        ["What is the capital of France?", "Name a primary colour.", "What is H2O?", "Who painted the Mona Lisa?"]
    )
] + [
    {
        "id": "m0",
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the tallest mountain?"},
        ],
    },
    {"id": "top-up", "prompt": "What colour is the sky?", "responses": ["Blue."]},
]
BAD = [
    ("not json at all", "invalid JSON"),
    ("", "empty line"),
    (b'{"id": "x13", "prompt": "caf\xe9"}', "not valid UTF-8 (byte 0xe9 at offset 28)"),
    ("[1, 2, 3]", "expected a JSON object, got list"),
    ('{"id": "x1"}', "missing field 'prompt' (or 'messages')"),
    ('{"id": "x2", "prompt": 42}', "field 'prompt' must be a non-empty string"),
    ('{"id": "x3", "prompt": "   "}', "field 'prompt' must be a non-empty string"),
    ('{"id": "x4", "messages": [{"role": "user"}]}', "field 'messages' must be a non-empty list"),
    ('{"id": "x5", "prompt": "hi", "responses": "yes"}', "field 'responses' must be a list of strings"),
    ('{"id": "x6", "prompt": "hi", "responses": ["a", ""]}', "field 'responses'[1] is empty"),
    ('{"id": "x7", "prompt": "hi", "label": "maybe"}', "field 'label' must be true/false or 0/1"),
    ('{"id": ["x8"], "prompt": "hi"}', "field 'id' must be a string or integer"),
    (json.dumps({"id": "x9", "prompt": "word " * 9000}), "over the teacher's context of 8192"),
    ('{"id": "x10", "prompt": "hi", "responses": [1, 2]}', "field 'responses' must be a list of strings"),
    ('{"id": "x11", "messages": "hello"}', "field 'messages' must be a non-empty list"),
    ('{"id": "x12", "prompt": "hi", "label": 2}', "field 'label' must be true/false or 0/1"),
]
assert len(BAD) == 16


def make_log(path):
    """32 lines: good pre-sampled, good to sample, and every kind of bad line, interleaved."""
    good = [json.dumps(r).encode() for r in GOOD_PRESAMPLED + GOOD_SAMPLED]
    lines, expected = [], []
    bad = [(line if isinstance(line, bytes) else line.encode(), err) for line, err in BAD]
    for n in range(32):
        if (n % 2 == 1 or not good) and bad:
            line, err = bad.pop(0)
            lines.append(line)
            expected.append(err)
        else:
            lines.append(good.pop(0))
            expected.append(None)
    assert not good and not bad and len(lines) == 32
    path.write_bytes(b"\n".join(lines) + b"\n")
    return expected


def run_batch(src, dst, *extra, check=True):
    proc = subprocess.run(
        [*BBWD, str(src), "-o", str(dst), *COMMON, *extra], capture_output=True, text=True, timeout=900
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_timings(rs):
    return [{k: v for k, v in r.items() if k != "timings"} for r in rs]


@pytest.mark.slow
def test_batch_32_lines_then_crash_and_resume(tmp_path):
    src = tmp_path / "logs.jsonl"
    expected = make_log(src)
    full = tmp_path / "full.jsonl"
    proc = run_batch(src, full, "--target", "smollm2-135m", "--save-matrix")
    out = rows(full)
    assert len(out) == 32
    assert [r["line"] for r in out] == list(range(1, 33))  # input order
    for r, err in zip(out, expected, strict=True):
        if err is None:
            assert r["error"] is None, r
            given = next((len(g["responses"]) for g in GOOD_PRESAMPLED if g["id"] == r["id"]), 0)
            assert r["n_samples"] == max(given, 3)  # fewer than K given: topped up from the target
            assert r["avg_wd"] > 0 and r["eigen_wd"] >= 1 and len(r["D"]) == r["n_samples"]
            assert set(r["timings"]) == {"sample", "teacher", "teacher_tokens", "transport", "baselines", "dse"}
            assert {"ls", "es", "er", "dse"} <= set(r["baselines"])  # every door computes the verdict's members
        else:
            assert r["error"].startswith(f"line {r['line']}: ") and err in r["error"], r
            assert r["avg_wd"] is None
    assert [r.get("label") for r in out if str(r["id"]).startswith("p")] == [i % 2 for i in range(10)]
    assert all(r["fingerprint"] == out[0]["fingerprint"] and len(r["input_hash"]) == 16 for r in out)
    assert "32 records (0 already done, 0 retried), 16 errors, K=3 responses each (-k)" in proc.stderr

    # kill -9 mid-run, then rerun the same command: nothing lost, nothing duplicated
    crashed = tmp_path / "crashed.jsonl"
    p = subprocess.Popen(
        [*BBWD, str(src), "-o", str(crashed), *COMMON, "--target", "smollm2-135m", "--save-matrix"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 600
    while time.time() < deadline and (not crashed.exists() or crashed.read_text().count("\n") < 6):
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    with open(crashed, "a") as f:
        f.write('{"id": "p0", "li')  # a torn last line, as a crash mid-write leaves it
    n_before = len(read_done(crashed))  # cuts the torn line
    assert 6 <= n_before < 32, "the kill must land mid-run"
    resumed = run_batch(src, crashed, "--target", "smollm2-135m", "--save-matrix")
    assert f"({n_before} already done, 0 retried)" in resumed.stderr
    assert without_timings(rows(crashed)) == without_timings(out)
    again = run_batch(src, crashed, "--target", "smollm2-135m", "--save-matrix")  # nothing left to do
    assert "0 records (32 already done, 0 retried)" in again.stderr and len(rows(crashed)) == 32


@pytest.mark.slow
def test_without_target_every_record_is_scored_on_the_first_valid_count(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(
        '{"prompt": "hi", "responses": ["only one"]}\n'
        '{"prompt": "hi", "responses": ["a b", "c d", "e f"]}\n'
        '{"prompt": "hi", "responses": ["a b", "c d", "e f", "g h"]}\n'
        '{"prompt": "hi", "responses": ["a", "b"]}\n'
        '{"prompt": "no responses"}\n'
    )
    dst = tmp_path / "out.jsonl"
    args = [*BBWD, str(src), "-o", str(dst), "--device", "cpu", "--strict", "--all-scores"]  # D, not only the verdict
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stderr  # --strict: some records had errors
    assert "K=3 responses each (the count of line 2's responses)" in proc.stderr
    out = rows(dst)
    assert [r["n_samples"] for r in out] == [0, 3, 3, 0, 0]  # more than K: the first K
    assert out[0]["error"] == (
        "line 1: field 'responses' has 1 response(s); every record of this run is scored "
        "on K=3 and there is no --target to sample more"
    )
    assert out[3]["error"].startswith("line 4: field 'responses' has 2 response(s)")
    assert out[4]["error"].startswith("line 5: field 'responses' has 0 response(s)")
    # the first 3 of 4 responses give the same D as the 3 alone
    again = tmp_path / "again.jsonl"
    src2 = tmp_path / "in2.jsonl"
    src2.write_text('{"prompt": "hi", "responses": ["a b", "c d", "e f"]}\n')
    subprocess.run(
        [*BBWD, str(src2), "-o", str(again), "--device", "cpu", "--all-scores"],
        check=True,
        capture_output=True,
        timeout=900,
    )
    assert rows(again)[0]["avg_wd"] == pytest.approx(out[2]["avg_wd"], rel=1e-9)


def test_parse_line_keeps_ids_and_labels():
    rec = parse_line('{"id": 7, "prompt": "q", "responses": ["a", "b"], "label": true}', 3)
    assert (rec.id, rec.line, rec.label, rec.responses, rec.error) == (7, 3, 1, ("a", "b"), None)
    assert rec.messages == [{"role": "user", "content": "q"}]
    assert parse_line('{"prompt": "q"}', 9).id == 9


@pytest.mark.parametrize(
    "line,error",
    [
        ('{"prompt": "Hi", "responses": ["a", "b", "c"], "x": NaN}', "line 4: invalid JSON (NaN is not JSON)"),
        ('{"prompt": "Hi", "meta": {"t": [1, Infinity]}}', "line 4: invalid JSON (Infinity is not JSON)"),
        ('{"prompt": "Hi", "label": -Infinity}', "line 4: invalid JSON (-Infinity is not JSON)"),
        ('{"messages": [{"role": "user", "content": ""}]}', "line 4: field 'messages'[0].content is empty"),
        (
            '{"messages": [{"role": "system", "content": " "}, {"role": "user", "content": "Hi"}]}',
            "line 4: field 'messages'[0].content is empty",
        ),
        ('{"prompt": ""}', "line 4: field 'prompt' must be a non-empty string"),
        (
            "[" * 100_000 + "]" * 100_000,
            "line 4: invalid JSON (RecursionError: maximum recursion depth exceeded while "
            "decoding a JSON array from a unicode string)",
        ),
    ],
    ids=["nan", "infinity", "minus-infinity", "empty-content", "blank-system", "empty-prompt", "deep-nesting"],
)
def test_non_json_constants_empty_content_and_deep_nesting_are_whole_one_line_errors(line, error):
    """NaN/Infinity anywhere is not JSON (as the README says), empty message content is refused as an
    empty prompt is, and the deep-nesting error is printed whole."""
    assert parse_line(line, 4).error == error


def test_read_done_cuts_a_torn_tail_of_bbwd_rows_only(tmp_path):
    row = {"id": 1, "line": 1, "error": None, "fingerprint": "f" * 16, "input_hash": "0" * 16}
    f = tmp_path / "o.jsonl"
    f.write_text(json.dumps(row) + "\n" + json.dumps({**row, "line": 2}) + "\n" + '{"id": 3, "li')
    assert [r.line for r in read_done(f)] == [1, 2]
    assert f.read_text().count("\n") == 2 and f.read_text().endswith("}\n")
    assert read_done(tmp_path / "missing.jsonl") == []


@pytest.mark.parametrize(
    "content",
    [
        b'{"id": 1, "prompt": "a log line, not output"}\n{"id": 2',
        b'{"id": 1, "prompt": "no newline"}',
        b"plain text\n",
        b'{"id": 1, "line": 2, "error": null, "fingerprint": "x", "input_hash": "y"}\n',
    ],
)
def test_read_done_refuses_and_never_touches_other_files(tmp_path, content):
    from blackbox_wd.errors import BBWDError

    f = tmp_path / "o.jsonl"
    f.write_bytes(content)
    with pytest.raises(BBWDError, match="is not bbwd batch output"):
        read_done(f)
    assert f.read_bytes() == content


def test_missing_input_file(tmp_path):
    proc = subprocess.run(
        [*BBWD, str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o.jsonl")], capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: input file not found: {tmp_path / 'nope.jsonl'}"


@pytest.mark.slow
def test_batch_black_box_from_replayed_fixture(tmp_path):
    """Prompts sampled through the API client from a recorded llama.cpp transcript, no network."""
    fixture = json.loads(Path("fixtures/llamacpp.json").read_text())
    prompts = fixture["meta"]["prompts"]
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"q{i}", "prompt": p}) + "\n" for i, p in enumerate(prompts))
        + json.dumps({"id": "given", "prompt": "2+2?", "responses": ["4", "Four.", "5", "4."]})
        + "\n"
        + json.dumps({"id": "short", "prompt": "2+2?", "responses": ["4", "Four.", "5"]})
        + "\n"
    )
    dst = tmp_path / "out.jsonl"
    env = {**os.environ, "BBWD_API_REPLAY": "fixtures/llamacpp.json"}
    args = [
        *BBWD,
        str(src),
        "-o",
        str(dst),
        "--target",
        "smollm2-135m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "-k",
        "4",
        "--temperature",
        "0.7",
        "--max-tokens",
        "24",
        "--seed",
        "0",
        "--no-cache",
        "--device",
        "cpu",
    ]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    out = rows(dst)
    assert [r["id"] for r in out] == ["q0", "q1", "given", "short"]
    assert [r["error"] for r in out[:3]] == [None, None, None]
    assert [r["n_samples"] for r in out] == [4, 4, 4, 0]
    # the record that needs one more sample asks for a request the transcript lacks: its own error only
    assert out[3]["error"].startswith("line 4: sample 0: replay miss in llamacpp.json") and not out[3]["transient"]
    # one n=4 request per prompt, as recorded, and the missed one: a failed record's usage is reported too
    assert "API: 3 requests, 0 cached" in proc.stderr
    # llama.cpp's usage counts one choice of n; the client counts each choice's logprob tokens
    recorded = [c for e in fixture["exchanges"][:2] for c in e["response"]["body"]["choices"]]
    completion = sum(len(c["logprobs"]["content"]) for c in recorded)
    assert len(recorded) == 8 and f"{completion} completion tokens fresh" in proc.stderr
    # the teacher re-tokenises the text: no EOS (llama.cpp's logprobs of a stopped choice include it)
    assert [r["token_counts"] for r in out[:2]] == [[24, 11, 24, 24], [24, 24, 24, 24]]


def test_a_shared_pass_that_raises_fails_only_the_record_that_caused_it(tiny_llama, tmp_path, monkeypatch):
    import asyncio

    from conftest import break_teacher_pass_on

    from blackbox_wd.clients.local import LocalSampler
    from blackbox_wd.doors.batch import BatchRunner
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings
    from blackbox_wd.teachers.forcing import HFTeacher

    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(
            json.dumps({"prompt": p, "responses": ["paris", "it is rome", "a big city"]}) + "\n"
            for p in ["what is the capital of france", "is rome big", "what is a city"]
        )
    )
    teacher = HFTeacher(*tiny_llama, name="tiny")
    runner = BatchRunner(Detector(teacher, LocalSampler(teacher), Settings(k=3, device="cpu"), group_size=3), False)
    asyncio.run(runner.run(src, tmp_path / "clean.jsonl"))
    break_teacher_pass_on(monkeypatch, "rome")
    asyncio.run(runner.run(src, tmp_path / "out.jsonl"))
    out, clean = rows(tmp_path / "out.jsonl"), rows(tmp_path / "clean.jsonl")
    assert out[1]["error"] == "line 2: scoring failed: RuntimeError: boom" and out[1]["avg_wd"] is None
    assert [out[n]["avg_wd"] for n in (0, 2)] == pytest.approx([clean[n]["avg_wd"] for n in (0, 2)], rel=1e-6)


def test_a_record_with_a_response_gets_its_answer_wd(tiny_llama, tmp_path):
    import asyncio

    from blackbox_wd.clients.local import LocalSampler
    from blackbox_wd.doors.batch import BatchRunner
    from blackbox_wd.measure.transport import w2_to_each
    from blackbox_wd.measure.wd import answer_wd
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings
    from blackbox_wd.teachers.forcing import HFTeacher

    samples = ["paris", "it is rome", "a big city"]
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"prompt": "capital of france", "responses": samples, "response": "lyon, surely"})
        + "\n"
        + json.dumps({"prompt": "capital of france", "responses": samples})
        + "\n"
        + json.dumps({"prompt": "capital of france", "responses": samples, "response": " "})
        + "\n"
    )
    teacher = HFTeacher(*tiny_llama, name="tiny")
    runner = BatchRunner(Detector(teacher, LocalSampler(teacher), Settings(k=3, device="cpu"), group_size=3), False)
    asyncio.run(runner.run(src, tmp_path / "out.jsonl"))
    with_answer, without, bad = rows(tmp_path / "out.jsonl")
    states = teacher.encode([{"role": "user", "content": "capital of france"}], ["lyon, surely", *samples])
    assert with_answer["answer_wd"] == pytest.approx(
        answer_wd(w2_to_each(states[0].states, [s.states for s in states[1:]])), rel=1e-6
    )
    assert without["answer_wd"] is None and with_answer["avg_wd"] == pytest.approx(without["avg_wd"], rel=1e-6)
    assert bad["error"] == "line 3: field 'response' must be a non-empty string"


def test_a_response_over_the_context_leaves_the_record_scored_with_answer_error(tiny_llama, tmp_path):
    import asyncio

    from blackbox_wd.clients.local import LocalSampler
    from blackbox_wd.doors.batch import BatchRunner
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings
    from blackbox_wd.teachers.forcing import HFTeacher

    samples = ["paris", "it is rome", "a big city"]
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"prompt": "capital of france", "responses": samples, "response": "rome " * 80})
        + "\n"
        + json.dumps({"prompt": "capital of france", "responses": samples})
        + "\n"
    )
    teacher = HFTeacher(*tiny_llama, name="tiny")  # a context of 64 positions
    runner = BatchRunner(Detector(teacher, LocalSampler(teacher), Settings(k=3, device="cpu"), group_size=2), False)
    asyncio.run(runner.run(src, tmp_path / "out.jsonl"))
    long, plain = rows(tmp_path / "out.jsonl")
    assert long["error"] is None and long["avg_wd"] == pytest.approx(plain["avg_wd"], rel=1e-6)
    assert long["answer_wd"] is None and long["answer_error"].startswith("prompt+judged answer has ")
    assert "over the teacher's context of 64" in long["answer_error"] and "answer_error" not in plain


@pytest.mark.slow
def test_a_response_gets_its_sentences_scored(smollm_teacher, tmp_path):
    import asyncio

    from conftest import direct_sentences

    from blackbox_wd.clients.local import LocalSampler
    from blackbox_wd.doors.batch import BatchRunner
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings

    prompt = "What is the capital of Australia?"
    samples = ["The capital of Australia is Canberra.", "Canberra.", "It is Canberra, in the ACT."]
    answer = "The capital is Sydney. It lies on the Molonglo River.\nDr. Smith founded it in 1913."
    own = ["The capital is Sydney.", "It lies on the Molonglo River.\nDr. Smith founded it in 1913."]
    base = {"prompt": prompt, "responses": samples}
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {**base, "response": answer},
                {**base, "response": answer, "sentences": own},
                base,
                {**base, "response": answer, "sentences": ["The capital is Sydney.", "It is Canberra."]},
                {**base, "sentences": own},
                {**base, "response": answer, "sentences": "The capital is Sydney."},
            ]
        )
    )
    teacher = smollm_teacher
    runner = BatchRunner(Detector(teacher, LocalSampler(teacher), Settings(k=3, device="cpu"), group_size=6), False)
    asyncio.run(runner.run(src, tmp_path / "out.jsonl"))
    split_row, own_row, plain, missing, orphan, wrong = rows(tmp_path / "out.jsonl")
    messages = [{"role": "user", "content": prompt}]
    for row, given in ((split_row, None), (own_row, own)):
        texts, scores = direct_sentences(teacher, messages, answer, samples, given)
        assert row["error"] is None and [s["text"] for s in row["sentences"]] == texts
        assert all(answer[s["start"] : s["end"]] == s["text"] for s in row["sentences"])
        assert [s["score"] for s in row["sentences"]] == pytest.approx(scores, rel=1e-5)
        assert row["sentence_wd"] == pytest.approx(sum(scores) / len(scores), rel=1e-5)
        assert row["answer_wd"] > 0
    assert len(split_row["sentences"]) == 3 and own_row["sentences"][1]["text"] == own[1]
    assert plain["sentences"] is None and plain["sentence_wd"] is None and plain["answer_wd"] is None
    assert missing["error"] == (
        "line 4: field 'sentences'[1] is not in the answer (after character 22): 'It is Canberra.'"
    )
    assert orphan["error"] == "line 5: field 'sentences' needs the field 'response' they are sentences of"
    assert wrong["error"] == "line 6: field 'sentences' must be a list of non-empty strings"
    assert missing["sentences"] is None and missing["avg_wd"] is None
