"""``bbwd eval``'s outputs (summary.md and its figures) on synthetic results."""

from __future__ import annotations

import numpy as np
import pytest

from blackbox_wd.calibration.evaluation.methods import (
    METHODS,
    SHOWN_IF_SCORED,
    best_baseline,
    compare,
    get_score,
    method_table,
)
from blackbox_wd.calibration.members import MEMBER_NAMES
from blackbox_wd.doors.eval.outputs import pick_extremes, write_outputs
from blackbox_wd.doors.eval.summary import timing_lines, truncation_lines, write_summary


def _synthetic(n: int = 40, k: int = 5, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    results = []
    for i in range(n):
        label = int(i % 3 == 0)
        pts = rng.normal(scale=1.0 + 2.0 * label, size=(k, 2))
        d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
        results.append(
            {
                "id": f"p{i}",
                "label": label,
                "label_em": int(i % 4 == 0),
                "D": d.tolist(),
                "avg_wd": float(d.mean()),
                "eigen_wd": float(d.max()) + 0.01 * i,
                "answer_wd": float(d[0].mean()),
                "settings": {"k": k, "teacher": "synthetic"},
                "baselines": {
                    "lne": label + rng.normal(),
                    "ls": rng.random(),
                    "es": -float(label),
                    "er": rng.random(),
                    "dse": None if i == 0 else float(rng.random()),
                },
            }
        )
    return results


def test_get_score_lookup_order():
    r = {"avg_wd": 1.0, "baselines": {"lne": 2.0}, "scores": {"es": 3.0}}
    assert get_score(r, "avg_wd") == 1.0 and get_score(r, "lne") == 2.0 and get_score(r, "es") == 3.0
    assert np.isnan(get_score(r, "dse"))


def test_method_table_values():
    results = _synthetic()
    table = method_table(results, n_boot=200)
    assert set(table) == set(METHODS) - set(SHOWN_IF_SCORED)  # no result has a SentenceWD
    assert table["es"].auroc == pytest.approx(0.0)  # es = -label: perfectly reversed
    assert table["dse"].n == 39  # the None is left out


def test_write_outputs_makes_three_files(tmp_path):
    results = _synthetic()
    paths = write_outputs(results, tmp_path / "out", n_boot=200, title="Synthetic")
    assert set(paths) == {"summary", "roc", "heatmaps"}
    for key in ("roc", "heatmaps"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert paths[key].stat().st_size > 5000
    md = paths["summary"].read_text()
    assert md.startswith("# Synthetic")
    assert "- prompts: 40" in md
    assert "Hallucination base rate: 0.350 (14 hallucinated, 26 correct, n = 40)" in md  # i % 3 == 0
    assert "Hallucination base rate: 0.250 (10 hallucinated, 30 correct, n = 40)" in md  # label_em: i % 4 == 0
    table = method_table(results, n_boot=200)
    es = table["es"]
    # es = -label ranks every hallucination last: AUROC 0, AUPRC = the base rate
    assert (es.auroc, es.lo, es.hi, es.auprc) == (0.0, 0.0, 0.0, pytest.approx(14 / 40))
    assert f"| ES | 0.000 [0.000, 0.000] | 0.350 | {es.prr:.3f} | 40 |" in md
    assert "- teacher: `\"synthetic\"`" in md
    # the best baseline by AUROC is the reference of the paired comparison
    best = best_baseline(table)
    assert best == max(("lne", "ls", "es", "er", "dse"), key=lambda m: table[m].auroc)
    assert f"Paired difference to the best baseline, {MEMBER_NAMES[best]} (AUROC {table[best].auroc:.3f}" in md


def test_only_a_verdict_the_ci_supports_is_bold(tmp_path):
    rng = np.random.default_rng(0)
    results = []
    for i in range(60):
        label = int(i % 2 == 0)
        noise = float(rng.random())
        results.append(
            {
                "label": label,
                "avg_wd": label + 0.1 * rng.random(),
                "eigen_wd": noise,
                "baselines": {"lne": noise, "ls": float(rng.random())},
            }
        )
    table = method_table(results, n_boot=300)
    assert best_baseline(table) in ("lne", "ls")
    md_path = tmp_path / "summary.md"
    write_summary(results, md_path, label_keys=("label",), n_boot=300)
    md = md_path.read_text()
    better = compare(results, "avg_wd", best_baseline(table), n_boot=300)
    assert better.verdict == "better" and better.lo > 0
    assert f"| AvgWD | {better.diff:+.3f} [{better.lo:+.3f}, {better.hi:+.3f}] | 60 | **better** |" in md
    if best_baseline(table) == "lne":  # EigenWD is LNE itself: a CI of exactly 0
        assert "| EigenWD | +0.000 [+0.000, +0.000] | 60 | no difference |" in md
    assert md.count("**") == 2  # nothing else is bold: no "best" point estimate


def test_timing_and_truncation_lines():
    # teacher_tokens is a count beside the seconds: it is in no total and no share
    rows = [
        {
            "kind": "math",  # DSE 25% of 4 s
            "timings": {"sample": 1.0, "teacher": 2.0, "teacher_tokens": 500, "dse": 1.0},
            "finish_reasons": ["length", "stop"],
            "responses": ["so \\boxed{1}", "cut off"],
            "answer": "\\boxed{2}",
            "answer_finish_reason": "stop",
        },
        {
            "kind": "math",
            "timings": {"sample": 3.0, "dse": 1.0},  # 25% of 4 s
            "finish_reasons": ["length", "length"],
            "responses": ["a", "b"],
            "answer": "none",
            "answer_finish_reason": "length",
        },
        {
            "kind": "qa",
            "timings": {"sample": 9.0, "dse": 1.0},  # 10% of 10 s
            "finish_reasons": ["stop", "stop"],
            "responses": ["x", "y"],
            "answer": "x",
            "answer_finish_reason": "stop",
        },
    ]
    lines = timing_lines(rows)
    assert lines[0] == "- time per prompt (median s): sample 3.00, teacher 2.00, dse 1.00; total 4.00"
    assert lines[1] == "- DSE share of a prompt's time: median 25.00%, max 25.00%"
    # MATH: 3 of 4 samples cut, 3 of 4 without a box; judged answers: 1 of 2 cut, 1 of 2 without a box
    assert truncation_lines(rows, "math") == [
        "- MATH (2 prompts): samples cut off at max tokens 75.0% (3 of 4), without \\boxed{} 75.0% (3 of 4); "
        "judged answers cut off 50.0% (1 of 2), without \\boxed{} 50.0% (1 of 2)"
    ]
    assert truncation_lines(rows, "qa") == [
        "- QA (1 prompts): samples cut off at max tokens 0.0% (0 of 2); judged answers cut off 0.0% (0 of 1)"
    ]


def test_pick_extremes_and_missing_label(tmp_path):
    results = _synthetic(n=10)
    top, bottom = pick_extremes(results, "eigen_wd", 2)
    s = [r["eigen_wd"] for r in results]
    assert top == list(np.argsort(s)[::-1][:2]) and bottom == list(np.argsort(s)[:2])
    for r in results:
        del r["label_em"]
    paths = write_outputs(results, tmp_path, n_boot=50, settings={"note": "given"})
    md = paths["summary"].read_text()
    assert "label_em" not in md and "- note: `\"given\"`" in md
    with pytest.raises(ValueError):
        write_outputs([], tmp_path)


def test_roc_on_a_secondary_label_that_some_results_lack(tmp_path):
    # Every primary label is 1 (one class), so the ROC uses label_em, which math items lack.
    results = _synthetic(n=12)
    for i, r in enumerate(results):
        r["label"] = 1
        if i % 3 == 0:
            del r["label_em"]
    paths = write_outputs(results, tmp_path, n_boot=50)
    assert paths["roc"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = paths["summary"].read_text()
    assert "Hallucination base rate: 0.250 (2 hallucinated, 6 correct, n = 8)" in md  # label_em: i in {4, 8}
    assert "Hallucination base rate: 1.000 (12 hallucinated, 0 correct, n = 12)\n\nOne class only" in md
    assert md.count("| AvgWD |") == 2  # label_em's table and its paired comparison, none under `label`


@pytest.mark.parametrize("key", ["human_score", "unsupported_share"])
def test_continuous_label_gets_pearson_and_spearman_and_no_roc(tmp_path, key):
    """Each passage label (WikiBio's human score, the long-form sets' share of unsupported claims) gets its table."""
    from scipy.stats import pearsonr, spearmanr

    rng = np.random.default_rng(5)
    human = rng.choice([0.0, 0.5, 1.0], size=30)
    results = [
        {
            "id": f"w{i}",
            key: float(h),
            "avg_wd": float(h + rng.normal(0, 0.3)),
            "eigen_wd": float(rng.random()),
            "answer_wd": float(2 * h + rng.normal(0, 0.1)),
            "D": [[0.0, 1.0], [1.0, 0.0]],
        }
        for i, h in enumerate(human)
    ]
    paths = write_outputs(results, tmp_path, n_boot=100)
    assert "roc" not in paths and paths["heatmaps"].exists()  # no 0/1 label: nothing to draw a ROC of
    text = paths["summary"].read_text()
    assert f"## Label `{key}` (continuous)" in text and text.count("(continuous)") == 1
    assert "## Label `label`" not in text
    avg = np.array([r["avg_wd"] for r in results])
    row = next(line for line in text.splitlines() if line.startswith("| AvgWD |"))
    assert row.startswith(f"| AvgWD | {100 * pearsonr(avg, human)[0]:.2f} [")
    assert f"| {100 * spearmanr(avg, human)[0]:.2f} [" in row and row.endswith("| 30 |")
    assert "| LNE | — | — | 0 |" in text  # a method without scores is shown empty


LABELS = ("accurate", "minor_inaccurate", "major_inaccurate")


def _passages(n: int = 24, seed: int = 6) -> list[dict]:
    """WikiBio-like rows: 2-6 labelled sentences each, scored by severity plus noise (None for some),
    their mean as SentenceWD, the human score, and a 0/1 label."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        severity = rng.integers(0, 3, rng.integers(2, 7)) if i % 5 else np.full(3, 2)  # every 5th wholly major
        scores = [None if (i + j) % 7 == 0 else float(v + rng.normal(0, 1.0)) for j, v in enumerate(severity)]
        scored = [x for x in scores if x is not None]
        rows.append(
            {
                "id": f"b{i}",
                "human_score": float(np.mean(severity) / 2),
                "label": int(severity.mean() > 1),
                "avg_wd": float(rng.random()),
                "eigen_wd": float(rng.random()),
                "answer_wd": float(severity.mean() + rng.normal()),
                "sentence_labels": [LABELS[v] for v in severity],
                "sentences": [
                    {"text": f"S{j}.", "start": 4 * j, "end": 4 * j + 3, "score": x} for j, x in enumerate(scores)
                ],
                "sentence_wd": float(np.mean(scored)) if scored else None,
                "D": [[0.0, 1.0], [1.0, 0.0]],
            }
        )
    return rows


def test_sentence_level_section_with_sentence_labels(tmp_path):
    from sklearn.metrics import auc, precision_recall_curve

    rows = _passages()
    rows[3]["sentences"] = None  # an answer the producer could not score: its sentences count as unscored
    paths = write_outputs(rows, tmp_path, n_boot=200)
    text = paths["summary"].read_text()
    assert "## Sentence level" in text and "[sentence_pr.png](sentence_pr.png)" in text
    assert paths["sentence_pr"] == tmp_path / "sentence_pr.png"
    assert paths["sentence_pr"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths["sentence_pr"].stat().st_size > 5000
    # the figures from the rows by hand: flatten, then sklearn's curve
    severity = np.array([LABELS.index(lab) for r in rows for lab in r["sentence_labels"]])
    scores = np.array(
        [
            np.nan if not r["sentences"] or s["score"] is None else s["score"]
            for r in rows
            for s in (r["sentences"] or [{"score": None}] * len(r["sentence_labels"]))
        ]
    )
    passage = np.array([i for i, r in enumerate(rows) for _ in r["sentence_labels"]])
    ok = np.isfinite(scores)
    wholly_major = {i for i, r in enumerate(rows) if set(r["sentence_labels"]) == {"major_inaccurate"}}
    assert wholly_major  # NonFact* has passages to leave out
    star = ok & ~np.isin(passage, list(wholly_major))
    expected = []
    for keep, y, s in ((ok, severity > 0, scores), (star, severity == 2, scores), (ok, severity == 0, -scores)):
        precision, recall, _ = precision_recall_curve(y[keep], s[keep])
        expected.append((100 * auc(recall, precision), 100 * y[keep].mean(), keep.sum(), len(set(passage[keep]))))
    bbwd = next(line for line in text.splitlines() if line.startswith("| bbwd sentence score"))
    cells = bbwd.split(" | ")[1:]
    assert [cell.split(" [")[0] for cell in cells] == [f"{e[0]:.2f}" for e in expected]
    assert "| random (positive share) x100 | " + " | ".join(f"{e[1]:.2f}" for e in expected) + " |" in text
    assert "| sentences scored (passages) | " + " | ".join(f"{e[2]} ({e[3]})" for e in expected) + " |" in text
    unscored = [int((~ok).sum()), int((~ok & ~np.isin(passage, list(wholly_major))).sum()), int((~ok).sum())]
    assert unscored[0] >= len(rows[3]["sentence_labels"])
    assert "| sentences without a score, left out | " + " | ".join(map(str, unscored)) + " |" in text


def test_sentence_wd_beside_the_other_scores(tmp_path):
    from scipy.stats import pearsonr
    from sklearn.metrics import roc_auc_score

    rows = _passages()
    text = write_outputs(rows, tmp_path, n_boot=100)["summary"].read_text()
    continuous = text.split("## Label `human_score` (continuous)")[1].split("##")[0]
    wd = np.array([r["sentence_wd"] for r in rows], dtype=float)
    keep = np.isfinite(wd)
    human = np.array([r["human_score"] for r in rows])
    line = next(line for line in continuous.splitlines() if line.startswith("| SentenceWD |"))
    assert line.startswith(f"| SentenceWD | {100 * pearsonr(wd[keep], human[keep])[0]:.2f} [")
    assert "| AvgWD |" in continuous and "| AnswerWD |" in continuous
    binary = text.split("## Label `label`")[1].split("##")[0]
    label = np.array([r["label"] for r in rows])
    assert f"| SentenceWD | {roc_auc_score(label[keep], wd[keep]):.3f} [" in binary


def test_no_sentence_section_without_sentence_labels(tmp_path):
    paths = write_outputs(_synthetic(), tmp_path, n_boot=50)
    text = paths["summary"].read_text()
    assert "Sentence level" not in text and "sentence_pr" not in paths and "SentenceWD" not in text
    assert not (tmp_path / "sentence_pr.png").exists()


def test_scored_sentences_must_match_the_labels(tmp_path):
    rows = _passages(6)
    rows[2]["sentences"] = rows[2]["sentences"][:-1]
    n = len(rows[2]["sentence_labels"])
    with pytest.raises(ValueError, match=f"result b2: {n - 1} scored 'sentences' for {n} 'sentence_labels'"):
        write_outputs(rows, tmp_path, n_boot=50)
