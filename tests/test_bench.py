"""Every bench script's smoke run, as a user runs it: ``python -m bench.<kind>.<name>`` from the repository root,
in its ``--quick`` mode (speed benchmarks) or on a tiny synthetic ``bbwd eval`` run written here (quality studies).

A new script in ``bench/speed`` or ``bench/quality`` needs a test below marked ``@smoke("<kind>.<name>")``:
``test_every_bench_script_has_a_smoke_run`` fails until it has one.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from blackbox_wd.calibration.evaluation.metrics import auroc
from blackbox_wd.signals.baselines import PEERS

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SMOKED: set[str] = set()


def smoke(script: str) -> Callable:
    """Mark a test as the smoke run of ``bench/<kind>/<name>.py`` (``script`` is ``"<kind>.<name>"``)."""

    def mark(test: Callable) -> Callable:
        SMOKED.add(script)
        return test

    return mark


def bench(script: str, *args: object, timeout: int = 300) -> str:
    """The stdout of ``python -m bench.<script> ARGS`` run from the repository root; it must exit 0."""
    cmd = [sys.executable, "-m", f"bench.{script}", *map(str, args)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr[-4000:]}"
    return out.stdout


def cells(line: str) -> list[str]:
    """The cells of one Markdown table row."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_rows(out: str) -> list[list[str]]:
    """The cells of the body rows of every Markdown table in ``out`` (headers and rules left out)."""
    rows, body = [], False
    for line in out.splitlines():
        if re.fullmatch(r"\|[-:|]+\|", line.strip()):
            body = True
        elif body and line.startswith("|"):
            rows.append(cells(line))
        else:
            body = False
    return rows


def test_every_bench_script_has_a_smoke_run_and_imports_no_other_script() -> None:
    """The scripts are bench/speed/*.py and bench/quality/*.py; they share code through the modules in bench/
    (``bench.common``, ``bench.verdicts``, ``bench.designs``), never through sys.path or each other."""
    scripts = {f"{p.parent.name}.{p.stem}" for p in BENCH.glob("*/*.py") if p.stem != "__init__"}
    assert {s.split(".")[0] for s in scripts} == {"speed", "quality"}
    assert scripts == SMOKED, f"no smoke run: {sorted(scripts - SMOKED)}; no script: {sorted(SMOKED - scripts)}"
    shared = {p.stem for p in BENCH.glob("*.py")}  # a script at the top is in neither folder and has no smoke run
    assert shared == {"__init__", "common", "designs", "verdicts"}, shared
    for path in BENCH.rglob("*.py"):
        text = path.read_text()
        assert "sys.path" not in text, path
        for module in re.findall(r"^\s*(?:from|import)\s+(bench[\w.]*)", text, flags=re.M):
            assert module.count(".") == 1 and not module.startswith(("bench.speed", "bench.quality")), (path, module)


# Speed benchmarks: bench/speed


@smoke("speed.ot")
def test_ot_bench_quick_runs_and_matches_emd2() -> None:
    out = bench("speed.ot", "--quick")
    rows = [line for line in out.splitlines() if re.match(r"\|\s*(mixed|equal)\s*\|", line)]
    assert len(rows) == 4  # mixed and equal, M = 16 and 64, K = 10
    deviation = float(re.search(r"max relative deviation of D .*: (\S+)", out).group(1))
    assert deviation <= 1e-9


@smoke("speed.teacher_cpu")
def test_teacher_cpu_bench_quick_times_todays_pass_against_padded() -> None:
    """The padded pass is its own reference; today's pass moves the states by at most 1e-5 of the largest value
    on every workload."""
    out = bench("speed.teacher_cpu", "--quick", timeout=600)
    rows = {}
    for line in out.splitlines():
        c = cells(line)
        if len(c) == 9 and c[0] in ("synthetic", "sac3", "wikibio"):
            rows[c[0], c[1]] = c
    assert {v for _, v in rows} == {"padded", "fp32"} and ("synthetic", "fp32") in rows
    for (_, variant), c in rows.items():
        tokens, ms, per_s, speed_up = int(c[2]), float(c[3]), float(c[4]), float(c[5].rstrip("x"))
        rel, token_rel = float(c[7]), float(c[8])  # max |d| over the largest |value|; median per token
        assert tokens > 0 and per_s == pytest.approx(tokens / ms * 1e3, rel=0.02, abs=1), c
        # one pass over the same tokens as the reference, timed in the same rounds: within 10x either way even
        # on a loaded CPU (the quick run has seen 0.5x-8.7x at load 6)
        assert 0.1 <= speed_up <= 10, c
        if variant == "padded":
            assert c[5] == "1.00x" and rel == 0.0
        if variant == "fp32":
            assert rel <= 1e-5 and token_rel <= 1e-5


def test_teacher_gpu_bench_counts_flops_by_hand() -> None:
    """MFU's numerator on a hand-sized model (hidden 2, MLP 3, one head, vocabulary 5): one prompt of 2 tokens and
    responses of 1 and 2 tokens, read once each (bbwd) or as prompt + response each (the plain reference)."""
    bench_gpu = importlib.import_module("bench.speed.teacher_gpu")
    cfg = dict(hidden_size=2, intermediate_size=3, num_attention_heads=1, num_key_value_heads=1, vocab_size=5)
    pairs = [([1, 2], [3]), ([1, 2], [4, 5])]
    # 68 FLOPs a token for the weights (2 x (q, o 8 + k, v 8 + MLP 18)); keys seen, causal: 13 (floor), 16 (plain)
    assert bench_gpu.flops(pairs, cfg, layers=1, head=False, floor=True) == 68 * 5 + 4 * 2 * 13
    assert bench_gpu.flops(pairs, cfg, layers=1, head=True, floor=False) == 68 * 7 + 4 * 2 * 16 + 2 * 2 * 5 * 7
    spec_ = {"shared": 3, "records": [[5, [2, 4]], [4, [1, 1]]]}
    got = bench_gpu.workload(spec_, 2, vocab=50)
    assert [(len(p), len(r)) for p, r in got] == [(5, 2), (5, 4), (4, 1), (4, 1)]
    assert got[0][0][:3] == got[2][0][:3] and got[0][0] is not got[2][0]  # the set's shared head, then its own


@smoke("speed.teacher_gpu")
def test_teacher_gpu_bench_quick_runs_on_cpu(tmp_path: Path) -> None:
    """The GPU bench's paths on a 4-layer model on CPU: both tables, every set, no GPU needed."""
    shapes = {
        "sac3": {"k": 10, "shared": 6, "records": [[12, [5 + i for i in range(10)]]] * 4},
        "wikibio": {"k": 20, "shared": 8, "records": [[14, [30 + i for i in range(20)]]] * 2},
    }
    (tmp_path / "shapes.json").write_text(json.dumps(shapes))
    out = bench("speed.teacher_gpu", "run", "--shapes", tmp_path / "shapes.json", "--quick", "--device", "cpu")
    rows = [line for line in out.splitlines() if line.startswith("|") and "---" not in line]
    assert len(rows) == 2 + 2 + 2  # two headers, one row per set in each table
    assert re.search(r"\|\s+sac3 \|\s+4 \|\s+40 \|\s+2048 \|", out), out
    assert re.search(r"\|\s+wikibio \|\s+2 \|\s+20 \|\s+[\d.]+ \|\s+[\d.]+ \|", out), out
    assert len(re.findall(r"\|\s+(teacher \(GPU\)|exact OT \(CPU\)) \|", out)) == 2


def test_teacher_gpu_bench_shapes_counts_the_recorded_sets_tokens(tmp_path: Path) -> None:
    """``shapes`` (the step before ``run``) on the first records of the two recorded sets: each record's prompt
    tokens and its K responses' token counts, the set's shared prefix no longer than its shortest prompt."""
    from blackbox_wd.doors.eval.data import data_dir

    data = tmp_path / "data"
    data.mkdir()
    for file in ("sac3_nq_open.jsonl", "wikibio_gpt3_dev.jsonl"):
        (data / file).write_text("".join((data_dir() / file).read_text().splitlines(keepends=True)[:3]))
    bench("speed.teacher_gpu", "shapes", "--data", data, "-o", tmp_path / "shapes.json")
    got = json.loads((tmp_path / "shapes.json").read_text())
    assert {name: (s["k"], len(s["records"])) for name, s in got.items()} == {"sac3": (10, 3), "wikibio": (20, 3)}
    for s in got.values():
        assert all(len(lengths) == s["k"] and min(lengths) > 0 for _, lengths in s["records"])
        assert 0 < s["shared"] <= min(prompt for prompt, _ in s["records"])


@smoke("speed.api")
def test_api_bench_quick_overlaps_requests_up_to_the_bound() -> None:
    """Every sample is one request (n ignored); with 4 in flight the rate beats one at a time, and no rate passes
    the bound concurrency / latency."""
    got = json.loads(bench("speed.api", "--quick").splitlines()[-1])
    assert got["requests"] == 2 * 4 and got["concurrency"] == 4 and got["bound_req_per_s"] == pytest.approx(80)
    assert got["speedup"] > 1 and 0 < got["fraction_of_bound"] <= 1.05, got


@smoke("speed.startup")
def test_startup_bench_quick_times_help_against_bare_python() -> None:
    out = bench("speed.startup", "--quick")
    rows = {
        m.group(1): float(m.group(2)) for m in re.finditer(r"\|\s*(bbwd --help|python -c pass)\s*\|\s*([\d.]+)", out)
    }
    assert set(rows) == {"bbwd --help", "python -c pass"}
    # An interpreter alone is less than one that also imports the CLI; --help loads no model (< 20 s loaded).
    assert 0 < rows["python -c pass"] < rows["bbwd --help"] < 20, rows


@smoke("speed.report")
def test_report_bench_quick_writes_opens_and_sorts_the_page() -> None:
    """The page of 2,000 synthetic batch rows (its labelling mode on), opened, sorted and a row labelled in the system
    chromium (it fails without one)."""
    out = bench("speed.report", "--quick", timeout=600)
    (row,) = table_rows(out)
    assert row[0] == "2,000"
    scored_mb, page_mb, write_s, open_s, sort_s, filter_s, search_s, row_s, label_s = map(float, row[1:])
    # the inlined libraries (~0.55 MB) and the rows' share of the 60 MB goal for 100,000
    assert 0 < page_mb < scored_mb and page_mb < 0.6 + 60 * 2_000 / 100_000
    assert all(0 < t < 60 for t in (write_s, open_s, sort_s, filter_s, row_s, label_s)), row
    assert 0.2 <= search_s < 60  # the search box waits 200 ms after the last key
    assert re.search(r"\d+ flagged, \d+ errors; texts cut: False", out), out


@smoke("speed.score")
def test_score_bench_quick_times_score_against_llamacpps_own_request() -> None:
    out = bench("speed.score", "--quick", timeout=600)
    rows = {
        m.group(1): (float(m.group(2)), int(m.group(3)))
        for m in re.finditer(
            r"\|\s*(llama.cpp n=10 request|bbwd score \(new process\))\s*\|\s*([\d.]+)\s*\|[^|]*\|[^|]*\|\s*(\d+)\s*\|",
            out,
        )
    }
    assert set(rows) == {"llama.cpp n=10 request", "bbwd score (new process)"}
    assert all(responses == 10 for _, responses in rows.values())
    (request, _), (score, _) = rows["llama.cpp n=10 request"], rows["bbwd score (new process)"]
    stages = {
        k: float(v)
        for k, v in re.findall(r"(\w+) ([\d.]+)", re.search(r"bbwd score stages \(median s\): (.*)", out).group(1))
    }
    # score's stages run inside its process: together less than its wall time, and at most a few minutes even on
    # a loaded CPU. Which of score and the reference request is slower is not asserted: the two are timed at
    # different moments, and the suite's other worker loads the CPU at one and not the other (a timing, not a
    # test: the bench's own line says whether its goal is met)
    assert {"sample", "teacher"} <= set(stages) and sum(stages.values()) < score, (stages, score)
    assert 0 < request < 300 and 0 < score < 300, rows
    ratio = float(re.search(r"bbwd score / reference: ([\d.]+)x", out).group(1))
    assert ratio == pytest.approx(score / request, rel=0.1, abs=0.1)
    assert re.search(r"goal 3 x [\d.]+ \+ 2 = [\d.]+ s: (met|NOT met)", out)


@smoke("speed.verdict_cost")
@pytest.mark.slow
def test_verdict_cost_bench_quick_bounds_what_the_verdict_adds() -> None:
    """The verdict's members and heads after the teacher pass, against the scores before them, on real recorded
    rows: the goal is at most 0.20 on the full run; the quick run on a loaded CPU stays far inside 1 (a verdict
    that re-read its calibration or rebuilt ROUGE's pure-Python LCS per pair would pass it on passages)."""
    out = bench("speed.verdict_cost", "--quick", timeout=600)
    ratios = {m.group(1): float(m.group(2)) for m in re.finditer(r"\|\s*(\w+)\s*\|(?:[^|]*\|){4}\s*([\d.]+)\s*\|", out)}
    assert set(ratios) == {"sac3_nq_open", "wikibio_gpt3_dev"}, out
    assert all(0 < r < 1 for r in ratios.values()), ratios


@smoke("speed.all_scores")
@pytest.mark.slow
def test_all_scores_bench_quick_skips_the_teacher_on_short_answers_with_the_same_verdict() -> None:
    """The all-scores bench on the fixture's first 8 records (short answers): every row skips the teacher by default,
    p and the flag are those of --all-scores, whose rows carry AvgWD and EigenWD (no speed figure is asserted: the
    machine is shared)."""
    out = bench("speed.all_scores", "--quick", timeout=600)
    (row,) = table_rows(out)
    assert row[:3] == ["report_log.jsonl", "8", "8"], row
    assert float(row[3]) > 0 and float(row[4]) > 0 and float(row[6]) > 0 and float(row[7]) > 0, row
    assert row[8:] == ["yes", "yes"], row


# Quality studies: bench/quality, on synthetic `bbwd eval` runs


TAGS = ("accurate", "minor_inaccurate", "major_inaccurate")


def eval_rows(n: int, k: int, passages: bool, stages: tuple[int, ...] = (), seed: int = 0) -> list[dict]:
    """``n`` scored rows of a synthetic ``bbwd eval`` run at K = ``k``: short answers with a 0/1 ``label`` (as SAC3's)
    or passages with a ``human_score`` and three labelled sentences, one of each label (as WikiBio's). D, AvgWD,
    EigenWD, LS and the sentences' scores follow the label, so that every head has something to find; ``stages``
    adds the scores at each of those K, as a ``bbwd eval -k auto`` row has them."""
    rng = np.random.default_rng(seed)

    def scores(y: float, k: int) -> dict:
        e = rng.normal(size=(k, k))
        d = (20 + 10 * y) * (1 + 0.1 * (e + e.T)) * (1 - np.eye(k))
        return {
            "D": d.tolist(),
            "avg_wd": float(d.sum() / (k * (k - 1))),
            "eigen_wd": float(np.exp(rng.normal(5 + y, 0.5))),
            "ls": float(rng.normal(0.5 - 0.2 * y, 0.1)),
        }

    rows = []
    for i in range(n):
        y = (i % 4) / 3 if passages else float(i % 2)
        tags = [TAGS[(i + j) % 3] for j in range(3)] if passages else ["accurate"]
        sentences = [
            {
                "text": f"Sentence {j}.",
                "score": float(rng.normal(20 + 10 * (t != "accurate") + 5 * y, 3)),
                "unigram": float(rng.normal(6 + (t != "accurate") + y, 1)),
            }
            for j, t in enumerate(tags)
        ]
        row = {"id": f"{i}", **scores(y, k), "token_counts": [200 if passages else 12] * k, "sentences": sentences}
        if passages:
            row |= {"human_score": y, "sentence_labels": tags}
        else:
            row["label"] = int(y)
        if stages:
            row["stages"] = [{"k": s, "scores": {n: v for n, v in scores(y, s).items() if n != "D"}} for s in stages]
        rows.append(row)
    return rows


def eval_run(folder: Path, rows: list[dict]) -> Path:
    """A ``bbwd eval`` report folder holding ``rows`` (and an error row, which every study leaves out)."""
    folder.mkdir(parents=True)
    (folder / "settings.json").write_text(json.dumps({"teacher": "smollm2-135m", "norm": "none", "k": 5}))
    errors = [{"id": "failed", "error": "scoring failed: boom"}]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows + errors))
    return folder


@smoke("quality.verdict")
def test_verdict_study_on_a_synthetic_sac3_and_wikibio_run(tmp_path: Path) -> None:
    """The members and the sentence verdict, on two small runs whose scores follow the labels: AvgWD separates
    SAC3's classes, and the sentence verdict is printed beside its two parts."""
    sac3 = eval_run(tmp_path / "sac3", eval_rows(24, 5, passages=False))
    wiki = eval_run(tmp_path / "wikibio", eval_rows(16, 5, passages=True, seed=1))
    out = bench("quality.verdict", "--sac3", sac3, "--wikibio", wiki, timeout=600)
    assert out.startswith("# Verdict on sac3 (24) and wikibio (16)\n")
    rows = {c[0]: c for c in table_rows(out)}
    assert {"avg_wd", "log_eigen_wd", "log_eigen_wd_fixed", "ls"} <= set(rows), out
    assert float(rows["avg_wd"][1].split()[0]) > 0.9, rows["avg_wd"]
    assert "verdict, mean, deployed p" in rows, out
    assert "OT score (sentence)" in rows and "lexical surprise (unigram max)" in rows


@smoke("quality.support")
def test_support_study_on_three_wikibio_passages(tmp_path: Path) -> None:
    """The support lead on WikiBio's first three passages, read with the embedded teacher at K = 2: a passage whose
    samples are the answer itself gets the most support (its tokens copied), and the sentences' AUC-PR is printed."""
    from blackbox_wd.doors.eval.data import data_dir

    records = [json.loads(line) for line in (data_dir() / "wikibio_gpt3_dev.jsonl").read_text().splitlines()[:3]]
    rows = []
    for n, r in enumerate(records):
        answer = " ".join(r["sentences"][:3])
        at, sentences = 0, []
        for text, score in zip(r["sentences"][:3], (1.0, 2.0, 3.0), strict=True):
            start = answer.index(text, at)
            at = start + len(text)
            sentences.append({"text": text, "start": start, "end": at, "score": score, "unigram": score})
        samples = [answer, answer] if n == 0 else [x[:400] for x in r["samples"][:2]]
        rows.append(
            {
                "id": r["id"],
                "answer": answer,
                "responses": samples,
                "sentences": sentences,
                "sentence_labels": r["sentence_labels"][:3],
                "human_score": [0.0, 0.5, 1.0][n],
                "avg_wd": float(n),
                "sentence_wd": float(n),
            }
        )
    run = eval_run(tmp_path / "wikibio_gpt3_dev-k2", rows)
    out = bench("quality.support", "--runs", tmp_path, "--k", 2, timeout=600)
    row = next(c for c in table_rows(out) if c[0] == "wikibio_gpt3_dev")
    assert row[1] == "3" and float(row[2]) > 50 and float(row[4]) == 100.0, row  # the copied answer: least risk
    assert "wikibio_gpt3_dev: 9 sentences, NonFact AUC-PR x100: support" in out, out
    assert run.is_dir()


@smoke("quality.adaptive")
def test_adaptive_study_replays_a_k_auto_run(tmp_path: Path) -> None:
    """-k auto replayed with K at most 5 (stages 3 and 5) from one ``-k auto`` run holding every stage; each prompt
    draws 3 or 5 samples. The ``mean`` combiner: ``select`` fits the same heads, several times slower."""
    sciq = eval_run(tmp_path / "sciq", eval_rows(30, 5, passages=False, stages=(3, 5)))
    out = bench("quality.adaptive", "--set", f"sciq={sciq}", "--k-max", 5, "--combiner", "mean", timeout=600)
    assert "combiner mean" in out and "### sciq: 30 prompts, k_max 5, stages 3, 5" in out, out
    drawn = [float(c[1].removesuffix(" of 5")) for c in table_rows(out) if c[0] == "samples drawn, mean"]
    assert len(drawn) == 1 and 3 <= drawn[0] <= 5, out


@smoke("quality.transfer")
def test_transfer_study_leaves_each_set_out_and_replays_k_auto(tmp_path: Path) -> None:
    """Three synthetic recorded sets at K = 3 and 5: each left out of a fit on the other two, scored as batch scores
    it (K = 5), with its best single member and the -k auto replay (stages 3 and 5)."""
    settings = {
        "teacher": "smollm2-135m",
        "target": "recorded",
        "sampler": None,
        "endpoint": None,
        "layer": 15,
        "temperature": None,
        "top_p": None,
        "max_tokens": None,
        "alpha": 0.001,
        "p": 0.1,
        "proj_dim": 128,
        "proj_seed": 0,
        "norm": "none",
    }
    for n, name in enumerate(("one", "two", "three")):
        for k in (3, 5):
            rows = [{**r, "source": name, "n_samples": k} for r in eval_rows(30, k, passages=False, seed=n)]
            run = eval_run(tmp_path / f"{name}-k{k}", rows)
            (run / "settings.json").write_text(json.dumps({**settings, "k": k}))
    out = bench("quality.transfer", "--runs", tmp_path, "--k", 5, "--combiners", "mean", "--folds", 2, "--auto")
    verdicts, alone = out.split("| left out, each alone")
    rows = {c[0]: c for c in table_rows(verdicts)}
    assert {"one", "two", "three"} <= set(rows), out
    for name in ("one", "two", "three"):
        verdict, drawn = float(rows[name][2]), float(rows[name][12])
        assert verdict > 0.8 and 3 <= drawn <= 5, rows[name]
    # each W2 member alone beside ROUGE-1 on each set left out; AvgWD follows the labels here
    w2 = {c[0]: c for c in table_rows(alone)}
    assert set(w2) == {"one", "two", "three"} and all(float(w2[s][2]) > 0.8 for s in w2), alone
    # leave one model out: a set not in MODELS is a model of its own, so each set is left out once, as above
    out = bench(
        "quality.transfer", "--runs", tmp_path, "--k", 5, "--combiners", "mean", "--folds", 2, "--leave", "model"
    )
    assert "leave one model out" in out and {c[0] for c in table_rows(out)} >= {"one", "two", "three"}, out


@smoke("quality.teacher_members")
def test_teacher_members_study_fits_on_one_teacher_and_judges_the_other(tmp_path: Path) -> None:
    """Three synthetic models' sets scored by two teachers, the second's states 100 times the first's: the judged
    answer's rank among the samples (scale-free) lifts the heads of the texts alone in both directions, by the
    rule's margin, and is adopted for the sentence kind."""
    rng = np.random.default_rng(5)
    for n, name in enumerate(("one", "two", "three")):
        rows = []
        for r in eval_rows(60, 10, passages=False, seed=n):
            y, d = r["label"], np.asarray(r["D"])
            far = d.sum(axis=1).max() / 9 * (1.2 if y else 0.5)
            rows.append(
                {**r, "source": name, "answer_wd": far, "lexsim_rouge1": float(rng.normal(0.5 + 0.05 * y, 0.2))}
            )
        eval_run(tmp_path / "r" / f"{name}-k10", rows)
        scaled = [{**r, "D": (100 * np.asarray(r["D"])).tolist(), "answer_wd": 100 * r["answer_wd"]} for r in rows]
        eval_run(tmp_path / "g" / f"{name}-k10", scaled)
    out = bench("quality.teacher_members", "--runs", tmp_path / "r", "--other", tmp_path / "g")
    rows = table_rows(out)
    cells_ = [c for c in rows if c[0] in ("runs", "other")]
    assert len(cells_) == 6 and {c[3] for c in cells_} == {"sentence"}, out
    for c in cells_:
        base, rank = float(c[5]), float(c[7])
        assert rank > base + 0.05, c
    decision = [c for c in rows if c[1] == "**decision**"]
    assert decision == [["sentence", "**decision**", "", "", "", "answer_wd_rank"]] or decision[0][5] == "both", out


@smoke("quality.newcomer")
def test_newcomer_bench_runs_the_loop_through_every_door() -> None:
    """The 40 recorded answers of fixtures/labels_log.jsonl, 25 labelled by keys in the system Chromium (at least 10
    of each class, as a refit needs): the reload kept them, the page saw no error, and the rates are measured on the
    other 15."""
    out = bench("quality.newcomer", ROOT / "fixtures" / "labels_log.jsonl", "--n", 25, timeout=600)
    (row, again) = table_rows(out)
    assert row == again and row[:4] == ["labels_log", "15", "0", "25"], out
    assert all(0 <= float(v) <= 1 for v in row[4:10]), row  # ECE, FPR and TPR after the labels and before
    assert row[10:12] == ["0", "True"], row  # no console error, page error or request; the reload kept the labels


@smoke("quality.your_labels")
def test_your_labels_bench_calibrates_through_the_door_and_judges_the_rest() -> None:
    """SAC3's 250 batch rows as the user's set, 100 labelled (draws 0 and 1): both fitted with no option, the base
    AUROC and the best estimator's are sklearn's on the 150 rows not labelled (mean of the draws), and the N = 100
    checks are printed."""
    from sklearn.metrics import roc_auc_score

    fixture = ROOT / "fixtures" / "sac3_scores.jsonl"
    rows = [json.loads(line) for line in fixture.read_text().splitlines()]
    rows = [r for r in rows if r["error"] is None and r.get("label") is not None]
    base, peer = [], []
    for draw in (0, 1):
        rest = np.setdiff1d(np.arange(len(rows)), np.random.default_rng(draw).choice(len(rows), 100, replace=False))
        y = [rows[i]["label"] for i in rest]
        base.append(roc_auc_score(y, [rows[i]["p_hallucination"] for i in rest]))
        peer.append(max(roc_auc_score(y, [rows[i]["baselines"][k] for i in rest]) for k in PEERS))
    out = bench("quality.your_labels", fixture, "--n", 100, "--draws", 2)
    line = next(c for c in table_rows(out) if c[0] == "sac3_scores" and c[2] == "2 of 2")
    assert line[1] == "100" and float(line[4]) == pytest.approx(np.mean(base), abs=5e-4)
    assert float(line[5]) == pytest.approx(np.mean(peer), abs=5e-4) and 0 <= float(line[6]) <= 1
    checks = [c for c in table_rows(out) if c[0] == "sac3_scores" and len(c) == 6]  # the N = 100 checks
    assert len(checks) == 1 and set(checks[0][1:]) <= {"yes", "no"} and checks[0][-1] == "yes"


@smoke("quality.door")
def test_door_bench_reads_batch_outputs_as_the_report_does(tmp_path: Path) -> None:
    """A real batch output (fixtures/report_scores.jsonl: 19 labelled rows with a verdict and the peers), given as the
    K run and as its own ``-k auto`` run: the verdict's and each estimator's AUROC are ``metrics.auroc`` of the rows,
    the margin is to the best estimator, the flags agree on every row, and the two conditions are judged from them;
    a file with no labels is refused, naming it."""
    fixture = ROOT / "fixtures" / "report_scores.jsonl"
    rows = [json.loads(line) for line in fixture.read_text().splitlines()]
    done = [r for r in rows if r.get("p_hallucination") is not None]
    y = [r["label"] for r in done]
    verdict = auroc(y, [r["p_hallucination"] for r in done])
    peers = {k: auroc(y, [r["baselines"][k] for r in done]) for k in PEERS}
    out = bench("quality.door", fixture, "--auto", fixture)
    line = next(c for c in table_rows(out) if c[0] == "report_scores.jsonl")
    assert line[1] == str(len(done)) == "19"
    assert float(line[2]) == pytest.approx(verdict, abs=5e-4)
    assert [float(v) for v in line[3:8]] == pytest.approx([peers[k] for k in PEERS], abs=5e-4)
    assert float(line[8]) == pytest.approx(verdict - max(peers.values()), abs=5e-5)
    assert line[-3:] == ["10.00", f"{verdict:.3f}", "100.0% (19)"]
    met = verdict - max(peers.values()) >= -0.015
    assert f"(a) every margin >= -0.015: {'met' if met else 'not met'}" in out
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "label"}) + "\n" for r in rows))
    refused = subprocess.run(
        [sys.executable, "-m", "bench.quality.door", str(bare)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert refused.returncode != 0 and f"{bare}: no rows with a p_hallucination and a 0/1 label" in refused.stderr


@smoke("quality.claims")
def test_claims_bench_quick_measures_the_claim_head_on_two_sets() -> None:
    """The claim study (``python -m bench.quality.claims --quick``) on 6 answers of two gbu sets: the shipped claim
    head and its two members get an AUROC in [0, 1] on both sets, beside the issue's anchors."""
    out = bench("quality.claims", "--quick", timeout=900)
    rows = {c[0]: c for c in table_rows(out)}
    assert set(rows) == {"popqa_gpt35 (dev)", "factscore_gpt35"}, out
    for c in rows.values():
        assert all(0 <= float(v) <= 1 for v in (c[2].split()[0], c[3], c[4])), c
    assert rows["popqa_gpt35 (dev)"][5:] == ["0.630", "0.631", "0.746"], out
