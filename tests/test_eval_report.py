"""The report writer on synthetic results."""

from __future__ import annotations

import numpy as np
import pytest

from blackbox_wd.eval.report import METHODS, get_score, pick_extremes, summarize, write_report


def _synthetic(n: int = 40, k: int = 5, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    results = []
    for i in range(n):
        label = int(i % 3 == 0)
        pts = rng.normal(scale=1.0 + 2.0 * label, size=(k, 2))
        d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
        results.append({
            "id": f"p{i}", "label": label, "label_em": int(i % 4 == 0), "D": d.tolist(),
            "avg_wd": float(d.mean()), "eigen_wd": float(d.max()) + 0.01 * i,
            "settings": {"k": k, "teacher": "synthetic"},
            "baselines": {"lne": label + rng.normal(), "ls": rng.random(), "es": -float(label),
                          "er": rng.random(), "dse": None if i == 0 else float(rng.random())},
        })
    return results


def test_get_score_lookup_order():
    r = {"avg_wd": 1.0, "baselines": {"lne": 2.0}, "scores": {"es": 3.0}}
    assert get_score(r, "avg_wd") == 1.0 and get_score(r, "lne") == 2.0 and get_score(r, "es") == 3.0
    assert np.isnan(get_score(r, "dse"))


def test_summarize_values():
    results = _synthetic()
    table = summarize(results, n_boot=200)
    assert set(table) == set(METHODS)
    assert table["es"].auroc == pytest.approx(0.0)  # es = -label: perfectly reversed
    assert table["dse"].n == 39                      # the None is left out


def test_write_report_makes_three_files(tmp_path):
    results = _synthetic()
    paths = write_report(results, tmp_path / "out", n_boot=200, title="Synthetic")
    assert set(paths) == {"summary", "roc", "heatmaps"}
    for key in ("roc", "heatmaps"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert paths[key].stat().st_size > 5000
    md = paths["summary"].read_text()
    assert md.startswith("# Synthetic")
    assert "- prompts: 40" in md
    assert "Hallucination base rate: 0.350 (14 of 40)" in md   # i % 3 == 0 for 14 of 0..39
    assert "Hallucination base rate: 0.250 (10 of 40)" in md   # label_em: i % 4 == 0
    for name in ("AvgWD", "EigenWD", "LNE", "LS", "ES", "ER", "DSE"):
        assert f"| {name} |" in md or f"| **{name}** |" in md
    best = summarize(results, n_boot=200)
    top = max(best, key=lambda m: best[m].auroc)
    names = {"avg_wd": "AvgWD", "eigen_wd": "EigenWD", "lne": "LNE", "ls": "LS", "es": "ES", "er": "ER", "dse": "DSE"}
    assert f"| **{names[top]}** | **{best[top].auroc:.3f}** |" in md.split("## Label `label_em`")[0]
    assert "- teacher: `\"synthetic\"`" in md


def test_pick_extremes_and_missing_label(tmp_path):
    results = _synthetic(n=10)
    top, bottom = pick_extremes(results, "eigen_wd", 2)
    s = [r["eigen_wd"] for r in results]
    assert top == list(np.argsort(s)[::-1][:2]) and bottom == list(np.argsort(s)[:2])
    for r in results:
        del r["label_em"]
    paths = write_report(results, tmp_path, n_boot=50, settings={"note": "given"})
    md = paths["summary"].read_text()
    assert "label_em" not in md and "- note: `\"given\"`" in md
    with pytest.raises(ValueError):
        write_report([], tmp_path)


def test_roc_on_a_secondary_label_that_some_results_lack(tmp_path):
    # Every primary label is 1 (one class), so the ROC uses label_em, which math items lack.
    results = _synthetic(n=12)
    for i, r in enumerate(results):
        r["label"] = 1
        if i % 3 == 0:
            del r["label_em"]
    paths = write_report(results, tmp_path, n_boot=50)
    assert paths["roc"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = paths["summary"].read_text()
    assert "Hallucination base rate: 0.250 (2 of 8)" in md  # label_em on the 8 that have it: i in {4, 8}
