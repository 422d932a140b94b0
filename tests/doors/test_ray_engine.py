"""The Ray engine writes what the local engine writes: same rows, errors, order; budget, cache and kills.

One local Ray cluster (``ray.init(num_cpus=2)``, on a loopback address) serves the module. Rows are compared without
their ``timings``; scores to 1e-9 relative (in practice they are bit-identical: same groups, same
torch thread count).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import ray  # part of the test extra: these tests never skip
from tiny_vocab import WORDS

from blackbox_wd.calibration import Calibration
from blackbox_wd.doors.batch import BatchRunner, read_done
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import GROUP_SIZE, Settings
from tests.signals.test_claims_target import claims_settings

BBWD = [sys.executable, "-m", "blackbox_wd", "batch"]
LOOPBACK = "127.0.0.2"
SMALL = {"teacher_cpus": 0.5, "score_cpus": 0.5}  # two teacher actors and the score tasks share 2 CPUs


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 CPUs for the module, on a loopback address (Ray turns 127.0.0.1 itself into the
    machine's interface address, so the node takes another address of the loopback range)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR", _node_ip_address=LOOPBACK)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_same(ray_rows: list[dict], local_rows: list[dict]) -> float:
    """Equal rows but for timings, scores to 1e-9 relative; the largest relative score deviation."""
    assert len(ray_rows) == len(local_rows)
    worst = 0.0
    for a, b in zip(ray_rows, local_rows, strict=True):
        assert a.keys() == b.keys()
        for key in ("avg_wd", "eigen_wd"):
            if b[key] is None:
                assert a[key] is None, (a, b)
            else:
                assert a[key] == pytest.approx(b[key], rel=1e-9)
                worst = max(worst, abs(a[key] - b[key]) / max(abs(b[key]), 1e-300))
        same = ("timings", "avg_wd", "eigen_wd", "usage")  # usage: what each engine found in the shared cache
        assert {k: v for k, v in a.items() if k not in same} == {k: v for k, v in b.items() if k not in same}
    return worst


def run_local(settings: Settings, src: Path, dst: Path, sample_missing: bool, group_size: int, calibration="auto"):
    recorded = not sample_missing and settings.target is None  # as `bbwd batch` with no --target builds it
    detector = Detector.from_settings(settings, calibration, group_size=group_size, recorded=recorded)
    runner = BatchRunner(detector, sample_missing)
    return asyncio.run(runner.run(src, dst))


def ray_runner(settings: Settings, sample_missing: bool, group_size: int = GROUP_SIZE, calibration="auto", **resources):
    """The Ray engine as `bbwd batch --engine ray` builds it: the driver's detector from the one builder."""
    from blackbox_wd.doors.ray_engine import RayRunner

    built = RayRunner.build_options(settings)
    recorded = not sample_missing and settings.target is None  # as `bbwd batch` with no --target builds it
    detector = Detector.from_settings(settings, calibration, group_size=group_size, recorded=recorded, **built)
    return RayRunner(detector, sample_missing, **resources)


def run_ray(settings: Settings, src: Path, dst: Path, sample_missing: bool, group_size: int, **resources):
    return asyncio.run(ray_runner(settings, sample_missing, group_size, **resources).run(src, dst))


def tiny_log(path: Path) -> list[str | None]:
    """30 lines: prompts to sample, pre-sampled and topped-up records, and bad lines; the expected errors."""
    good = [{"id": f"s{i}", "prompt": " ".join(WORDS[i : i + 4])} for i in range(8)]
    good += [
        {
            "id": f"p{i}",
            "prompt": "what is the capital of france",
            "label": i % 2,
            "responses": ["paris", "it is rome", "a big city", "no"][i % 2 :],
        }
        for i in range(6)
    ]
    good += [{"id": "top-up", "messages": [{"role": "user", "content": "is rome big"}], "responses": ["yes"]}]
    bad = [
        (b"not json", "invalid JSON"),
        (b"", "empty line"),
        (b'{"prompt": "caf\xe9"}', "not valid UTF-8"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"id": "x1"}', "missing field 'prompt'"),
        (b'{"prompt": 42}', "field 'prompt' must be a non-empty string"),
        (b'{"prompt": "hi", "responses": "yes"}', "field 'responses' must be a list of strings"),
        (b'{"prompt": "hi", "responses": ["a", ""]}', "field 'responses'[1] is empty"),
        (b'{"prompt": "hi", "label": "maybe"}', "field 'label' must be true/false or 0/1"),
        (b'{"id": ["x"], "prompt": "hi"}', "field 'id' must be a string or integer"),
        (json.dumps({"id": "long", "prompt": "what " * 70}).encode(), "over the teacher's context of 64"),
        (b'{"messages": "hello"}', "field 'messages' must be a non-empty list"),
        (b'{"id": "x12", "prompt": "hi", "label": 2}', "field 'label' must be true/false or 0/1"),
        (b'{"prompt": "   "}', "field 'prompt' must be a non-empty string"),
        (b"{", "invalid JSON"),
    ]
    lines, expected = [], []
    for n in range(30):
        if n % 2 and bad:
            line, err = bad.pop(0)
        else:
            line, err = json.dumps(good.pop(0)).encode(), None
        lines.append(line)
        expected.append(err)
    assert not good and not bad
    path.write_bytes(b"\n".join(lines) + b"\n")
    return expected


def test_read_tasks_read_the_groups_the_local_engine_forms(tmp_path):
    """Each read task's group equals the local engine's group: skip, the retried lines, odd line ends."""
    from blackbox_wd.doors.ray_engine import group_spans
    from blackbox_wd.run.groups import groups, select_records
    from blackbox_wd.run.inputs import read_span

    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'\xef\xbb\xbf{"prompt": "a"}\n\n{"prompt": "caf\xe9"}\r\n'
        + b'{"prompt": "b"}\n' * 8
        + b'{"prompt": "last, no newline"}'
    )
    for skip, lines, size in [
        (0, None, 3),
        (4, None, 2),
        (0, frozenset({2, 3, 7, 11, 12}), 2),
        (5, None, 100),
        (12, None, 4),
        (0, frozenset(), 2),
    ]:
        local = list(groups(select_records(src, skip, lines), size))
        spans = group_spans(src, skip, lines, size)
        assert [read_span(src, offset, numbers) for offset, numbers in spans] == local
        assert [rec.line for g in local for rec in g] == [n for _, numbers in spans for n in numbers]
    assert [len(g) for g in local] == [] and len(group_spans(src, 0, None, 3)) == 4


def test_white_box_30_lines_with_bad_lines_equal_the_local_engine(cluster, tiny_folder, tmp_path):
    src = tmp_path / "in.jsonl"
    expected = tiny_log(src)
    settings = Settings(teacher=tiny_folder, target=tiny_folder, k=3, max_tokens=6, device="cpu")
    local = run_local(settings, src, tmp_path / "local.jsonl", True, 4)
    summary = run_ray(settings, src, tmp_path / "ray.jsonl", True, 4, teacher_workers=2, **SMALL)
    out = rows(tmp_path / "ray.jsonl")
    assert [r["line"] for r in out] == list(range(1, 31))
    for r, err in zip(out, expected, strict=True):
        assert (r["error"] is None) if err is None else (err in r["error"] and r["avg_wd"] is None), r
    assert sum(r["error"] is None for r in out) == 15 and all(r["n_samples"] == 3 for r in out if not r["error"])
    print(f"max relative deviation of scores, Ray vs local: {assert_same(out, rows(tmp_path / 'local.jsonl')):.3g}")
    assert (summary.records, summary.errors, summary.k) == (local.records, local.errors, local.k) == (30, 15, 3)


@pytest.mark.slow
def test_white_box_smollm_in_input_order_though_the_first_group_finishes_last(cluster, tmp_path):
    """Two teacher actors; group 1's long responses keep one busy while the other scores the rest."""
    long = [" ".join(["The capital of France is Paris, a city on the Seine."] * n) for n in (16, 15, 14)]
    first = [{"id": f"long{i}", "prompt": f"Describe Paris ({i}).", "responses": long} for i in range(2)]
    rest = [
        {"id": f"q{i}", "prompt": q}
        for i, q in enumerate(
            ["What is 2+2?", "Name a colour.", "Capital of Japan?", "Who wrote Hamlet?", "What is H2O?", "Is ice cold?"]
        )
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in first + rest))
    settings = Settings(target="smollm2-135m", k=3, max_tokens=6, device="cpu")
    run_local(settings, src, tmp_path / "local.jsonl", True, 2)
    run_ray(settings, src, tmp_path / "ray.jsonl", True, 2, teacher_workers=2, **SMALL)
    out = rows(tmp_path / "ray.jsonl")
    assert [r["id"] for r in out] == ["long0", "long1", "q0", "q1", "q2", "q3", "q4", "q5"]
    assert all(r["error"] is None for r in out) and min(out[0]["token_counts"]) > 150 > max(out[2]["token_counts"])
    print(f"max relative deviation of scores, Ray vs local: {assert_same(out, rows(tmp_path / 'local.jsonl')):.3g}")


@pytest.mark.slow
def test_black_box_replayed_equal_the_local_engine_through_one_shared_cache(cluster, tmp_path, monkeypatch):
    """Sampling actors write the API cache; a local run on the same cache then sends no request it holds."""
    fixture = json.loads(Path("fixtures/llamacpp.json").read_text())
    prompts = fixture["meta"]["prompts"]
    records = [{"id": f"q{i}", "prompt": p} for i, p in enumerate(prompts * 2)]
    records += [
        {"id": "given", "prompt": "2+2?", "responses": ["4", "Four.", "5", "4."]},
        {"id": "short", "prompt": "2+2?", "responses": ["4", "Four.", "5"]},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    monkeypatch.setenv("BBWD_API_REPLAY", "fixtures/llamacpp.json")  # forwarded to the sampling actors
    settings = Settings(
        target="smollm2-135m",
        base_url="http://127.0.0.1:9/v1",
        k=4,
        temperature=0.7,
        max_tokens=24,
        seed=0,
        device="cpu",
        cache_dir=str(tmp_path / "cache"),
    )
    on_ray = run_ray(settings, src, tmp_path / "ray.jsonl", True, 2, **SMALL)
    local = run_local(settings, src, tmp_path / "local.jsonl", True, 2)
    out = rows(tmp_path / "ray.jsonl")
    assert [r["error"] is None for r in out] == [True] * 5 + [False, False]
    assert out[5]["error"].startswith("line 6: sample 0: replay miss in llamacpp.json") and not out[5]["transient"]
    assert [r["token_counts"] for r in out[:2]] == [[24, 11, 24, 24], [24, 24, 24, 24]]
    print(f"max relative deviation of scores, Ray vs local: {assert_same(out, rows(tmp_path / 'local.jsonl')):.3g}")
    # the Ray run drew each prompt's 4 samples once (n=4) and cached them; the local run read them all
    # from that cache and asked only for the sample nobody holds (the replay miss)
    assert on_ray.usage.requests >= 3 and on_ray.usage.completion_tokens > 0
    assert (local.usage.requests, local.usage.cache_hits, local.usage.completion_tokens) == (1, 16, 0)


def test_the_sampling_actors_list_claims_as_the_local_engine_does(cluster, tmp_path, monkeypatch):
    """``--claims target`` on Ray: the sampling actors ask the target for the answer's claims (the recorded request
    replayed), and the row equals the local engine's, claims, p and flags included."""
    fixture = json.loads(Path("fixtures/llamacpp_claims.json").read_text())
    meta = fixture["meta"]
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "bio", "prompt": meta["prompt"], "response": meta["answer"]}) + "\n")
    monkeypatch.setenv("BBWD_API_REPLAY", "fixtures/llamacpp_claims.json")
    settings = claims_settings(meta)
    on_ray = run_ray(settings, src, tmp_path / "ray.jsonl", True, 2, **SMALL)
    run_local(settings, src, tmp_path / "local.jsonl", True, 2)
    out = rows(tmp_path / "ray.jsonl")
    assert out[0]["error"] is None and out[0]["claims"] == meta["claims"]
    assert on_ray.usage.requests == 2  # the samples' request and the claims'
    assert_same(out, rows(tmp_path / "local.jsonl"))


def test_api_budget_is_shared_by_the_sampling_actors(cluster, tiny_folder, tmp_path, monkeypatch):
    """Two sampling actors, --concurrency 3: never more than 3 requests in flight at the server.

    The key's variable is set after the cluster started: the actors get it from the driver.
    """
    from api_support import FaultServer

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"prompt": f"{w} is a city"}) + "\n" for w in WORDS[:8]))
    monkeypatch.setenv("SERVED_MODEL_KEY", "sk-test-key-0123456789")
    with FaultServer(latency=0.25, api_key="sk-test-key-0123456789") as server:
        settings = Settings(
            teacher=tiny_folder,
            target="served-model",
            base_url=server.base_url,
            k=4,
            api_key_env="SERVED_MODEL_KEY",
            concurrency=3,
            cache=False,
            device="cpu",
        )
        summary = run_ray(settings, src, tmp_path / "ray.jsonl", True, 2, sample_workers=2, **SMALL)
    assert summary.errors == 0 and summary.usage.requests == len(server.received) >= 32
    assert server.max_in_flight == 3  # the budget is used, and not exceeded (each actor alone would allow 3)


def teacher_actors() -> list[dict]:
    """The GCS records of the cluster's teacher actors (a live one has State ALIVE and its Pid)."""
    from ray._private import state

    return [a for a in state.actors().values() if a["ActorClassName"] == "MapWorker(MapBatches(TeacherStage))"]


def wait_alive_teacher(running, before: set, timeout: float = 300) -> dict:
    """The one live teacher actor not in ``before`` (earlier runs' actor ids): its GCS record, polled while
    ``running()`` is true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [a for a in teacher_actors() if a["State"] == "ALIVE" and a["Pid"] and a["ActorID"] not in before]
        if alive:
            (actor,) = alive
            return actor
        assert running(), "the run ended before its teacher actor was listed"
        time.sleep(0.1)
    raise AssertionError(f"no live teacher actor listed within {timeout} s")


def wait_lines(path: Path, n: int, running, timeout: float = 600) -> int:
    """Wait until ``path`` has ``n`` lines while ``running()`` is true; the lines it has."""
    deadline = time.time() + timeout
    while time.time() < deadline and (not path.exists() or path.read_bytes().count(b"\n") < n):
        assert running(), "the run ended before the kill"
        time.sleep(0.05)
    return path.read_bytes().count(b"\n")


N_PRESAMPLED = 240  # lines: the tiny teacher scores them in seconds, long enough for a kill to land mid-run


def presampled_log(path: Path, n: int = N_PRESAMPLED) -> None:
    answers = ["paris is big", "it is paris", "rome is a city"]
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "prompt": f"what is the capital of france {WORDS[i % len(WORDS)]}",
                    "responses": answers[i % 3 :] + answers[: i % 3],
                }
            )
            + "\n"
            for i in range(n)
        )
    )


def presampled_with_local_output(tmp_path: Path, teacher: str) -> tuple[Path, Path, Settings]:
    """The presampled log, scored by the local engine with ``teacher`` into local.jsonl (groups of 2); the Ray
    output's path; the settings (K=3)."""
    src = tmp_path / "in.jsonl"
    presampled_log(src)
    settings = Settings(teacher=teacher, k=3, device="cpu")
    run_local(settings, src, tmp_path / "local.jsonl", False, 2)
    return src, tmp_path / "ray.jsonl", settings


def test_killed_teacher_actor_is_restarted_and_every_line_written_once(cluster, tiny_folder, tmp_path):
    """kill -9 the one teacher actor mid-run: Ray restarts it, retries its task, the run completes."""
    src, dst, settings = presampled_with_local_output(tmp_path, tiny_folder)
    before = {a["ActorID"] for a in teacher_actors()}
    done: dict = {}
    run = threading.Thread(target=lambda: done.update(summary=run_ray(settings, src, dst, False, 2, **SMALL)))
    run.start()
    # killed as soon as it is listed alive: its model loaded, its first batches due. Waiting for output lines
    # instead raced the run (the state API lists an actor late).
    actor = wait_alive_teacher(run.is_alive, before)
    at_kill = dst.read_bytes().count(b"\n") if dst.exists() else 0
    os.kill(actor["Pid"], signal.SIGKILL)
    run.join(600)
    assert at_kill < N_PRESAMPLED, "the kill must land mid-run"
    assert (done["summary"].records, done["summary"].errors) == (N_PRESAMPLED, 0)
    assert [r["line"] for r in rows(dst)] == list(range(1, N_PRESAMPLED + 1))  # every line once, in order
    assert_same(rows(dst), rows(tmp_path / "local.jsonl"))
    (ours,) = [a for a in teacher_actors() if a["ActorID"] not in before]
    assert ours["ActorID"] == actor["ActorID"] and ours["NumRestarts"] == 1  # restarted by Ray, not replaced


def test_killed_driver_resumes_as_the_local_engine_does(cluster, tiny_folder, tmp_path):
    """`bbwd batch --engine ray` on the module's cluster, kill -9 mid-run, then the run again resumes it."""
    src, dst, settings = presampled_with_local_output(tmp_path, tiny_folder)
    cmd = [*BBWD, str(src), "-o", str(dst), "-k", "3", "--group-size", "2", "--teacher", tiny_folder]
    cmd += ["--device", "cpu", "--engine", "ray", "--ray-address", cluster]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    wait_lines(dst, 3, lambda: proc.poll() is None)
    proc.kill()
    proc.communicate()
    with open(dst, "a") as f:
        f.write('{"id": 9, "li')  # a torn last line, as a crash mid-write leaves it
    n_before = len(read_done(dst))
    assert 3 <= n_before < N_PRESAMPLED, "the kill must land mid-run"
    summary = run_ray(settings, src, dst, False, 2, **SMALL)
    assert (summary.resumed_from, summary.records) == (n_before, N_PRESAMPLED - n_before)
    assert [r["line"] for r in rows(dst)] == list(range(1, N_PRESAMPLED + 1))
    assert_same(rows(dst), rows(tmp_path / "local.jsonl"))


def test_all_scores_gives_the_same_verdicts_and_the_default_skips_the_teacher_as_the_local_engine(
    cluster, tiny_folder, tmp_path
):
    """#71 on Ray: the teacher actors force only the rows whose verdict reads the teacher (none here: short answers
    of a teacher judged by the heads of the texts alone), as the local engine; --all-scores forces them all, with the
    same p and flag."""
    from blackbox_wd.doors.ray_engine import RayRunner

    src, dst, settings = presampled_with_local_output(tmp_path, tiny_folder)
    run_ray(settings, src, dst, False, 2, **SMALL)
    default = rows(dst)
    assert_same(default, rows(tmp_path / "local.jsonl"))
    built = RayRunner.build_options(settings)
    every = Detector.from_settings(settings, group_size=2, recorded=True, all_scores=True, **built)
    asyncio.run(RayRunner(every, False, **SMALL).run(src, tmp_path / "all.jsonl"))
    forced = rows(tmp_path / "all.jsonl")
    assert [(r["p_hallucination"], r["flag"], r["members"]) for r in forced] == [
        (r["p_hallucination"], r["flag"], r["members"]) for r in default
    ]
    assert all(r["avg_wd"] is None and r["p_hallucination"] is not None for r in default)
    assert all(r["avg_wd"] > 0 and r["eigen_wd"] > 0 for r in forced)


def test_calibrated_rows_equal_the_local_engine_and_resume_checks_the_calibration(cluster, tiny_folder, tmp_path):
    from blackbox_wd.errors import BBWDError
    from tests.calibration.test_calibration import make

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "prompt": " ".join(WORDS[i : i + 3])}) + "\n" for i in range(5)))
    settings = Settings(teacher=tiny_folder, target=tiny_folder, k=3, max_tokens=6, device="cpu")
    cal = make(Detector.from_settings(settings).reported_settings())
    run_local(settings, src, tmp_path / "local.jsonl", True, 2, cal)
    run_ray(settings, src, tmp_path / "ray.jsonl", True, 2, calibration=cal, **SMALL)
    out = rows(tmp_path / "ray.jsonl")
    assert_same(out, rows(tmp_path / "local.jsonl"))
    assert all(
        r["calibration"] == cal.id and r["p_hallucination"] == pytest.approx(cal.verdict(r).p, rel=1e-12) for r in out
    )
    with pytest.raises(BBWDError, match="was written with another calibration"):
        run_ray(settings, src, tmp_path / "ray.jsonl", True, 2, **SMALL)


def test_the_driver_reports_the_resolved_device_and_the_local_fingerprint(cluster, tiny_folder):
    """The driver's wiring comes from the one builder: the device resolved for the cluster (no GPU here: cpu, as a
    local run resolves "auto"), the same reported settings and fingerprint as the local engine's."""
    settings = Settings(teacher=tiny_folder, target=tiny_folder, k=3, max_tokens=6, device="auto")
    driver, local = ray_runner(settings, True).detector, Detector.from_settings(settings, None)
    assert driver.reported.as_dict()["device"] == local.reported.as_dict()["device"] == "cpu"
    assert driver.reported.as_dict() == local.reported.as_dict() and driver.fingerprint == local.fingerprint


def test_missing_ray_is_one_error_line_naming_the_extra(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"prompt": "hi", "responses": ["a", "b"]}\n')
    code = (
        "import sys; sys.modules['ray'] = None; from blackbox_wd.doors.cli import main; "
        f"main(['batch', {str(src)!r}, '-o', {str(tmp_path / 'o.jsonl')!r}, '--engine', 'ray'])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr == "error: --engine ray needs Ray: pip install 'blackbox-wd[ray]' (ray[data]==2.60.0)\n"
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.slow
def test_adaptive_k_replayed_equals_the_local_engine(cluster, tmp_path, monkeypatch):
    """-k auto on Ray: the teacher actors run the stages, drawing through the cluster's API slots; the rows equal
    the local engine's, stop where it stopped, and make the requests the recorded stages made."""
    fixture = json.loads(Path("fixtures/llamacpp_auto.json").read_text())
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"a{i}", "prompt": p}) + "\n" for i, p in enumerate(fixture["meta"]["prompts"]))
    )
    monkeypatch.setenv("BBWD_API_REPLAY", "fixtures/llamacpp_auto.json")
    settings = Settings(
        target=fixture["meta"]["model"],
        base_url="http://127.0.0.1:9/v1",
        k=10,
        stop="settle",
        temperature=0.7,
        max_tokens=16,
        seed=0,
        device="cpu",
        cache=False,
    )
    recorded_under = Calibration.load("fixtures/calibration-api-auto.json")  # the bands the fixture's draws followed
    asyncio.run(ray_runner(settings, True, 2, recorded_under, **SMALL).run(src, tmp_path / "ray.jsonl"))
    run_local(settings, src, tmp_path / "local.jsonl", True, 2, recorded_under)
    out = rows(tmp_path / "ray.jsonl")
    assert {r["id"]: [r["n_samples"], r["usage"]["requests"]] for r in out} == fixture["meta"]["drawn"]
    print(f"max relative deviation of scores, Ray vs local: {assert_same(out, rows(tmp_path / 'local.jsonl')):.3g}")


def test_the_engine_builds_no_wiring_and_writes_no_environment():
    """Ray takes the driver's detector; its actors build theirs with the one builder (``Detector.from_settings``),
    the API options and key passed as values: no Settings, Detector, card or sampler built here, no environment."""
    import ast

    from blackbox_wd.doors import ray_engine

    tree = ast.parse(Path(ray_engine.__file__).read_text())
    called = {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
    }
    built = {"Settings", "Detector", "TeacherCard", "load_card", "make_api_sampler", "APISampler", "replace"}
    assert not called & built and "from_settings" in called
    assert not {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} & {"environ", "putenv"}
    assert not {kw.arg for n in ast.walk(tree) if isinstance(n, ast.Call) for kw in n.keywords} & {"runtime_env"}
