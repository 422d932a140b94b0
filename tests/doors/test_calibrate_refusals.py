"""`bbwd calibrate` ends in a one-line error, and writes nothing, when the labelled rows cannot make a calibration
worth having (#59): rows that lack members the refitted heads read, and a fit that judges the rows worse than their
base rate out of fold (unless --force)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_support import run_cli

from blackbox_wd.calibration import Calibration
from tests.doors.test_cli_calibrate import RECORDED_SETTINGS, SETTINGS, labelled_rows


def calibrate(folder, *args: str) -> tuple[int, str]:
    """``bbwd calibrate`` of ``folder``'s results.jsonl by its ``label_em``, to cal.json, in-process."""
    return run_cli(
        "calibrate", str(folder / "results.jsonl"), "--label", "label_em", "-o", str(folder / "cal.json"), *args
    )


@pytest.mark.parametrize(
    "settings,heads,lacking",
    [
        (RECORDED_SETTINGS, "embedded smollm2-135m.json", "dse (80 of 80 rows)"),  # white-box rows: its own file
        (
            {**RECORDED_SETTINGS, "white_box": False},
            "embedded smollm2-135m.api.json",
            "lexsim_rouge1 (80 of 80 rows), lexsim_rougel (80 of 80 rows)",  # the phrase heads' (#58)
        ),
    ],
)
def test_rows_of_avg_wd_and_eigen_wd_alone_are_refused_naming_what_they_lack(tmp_path, settings, heads, lacking):
    """80 labelled rows of AvgWD and EigenWD alone: a refit of the shipped heads (which read DSE, LS, ...) would be
    fitted on the last head alone and carried into the others; it was written, with a map of no use."""
    labelled_rows(tmp_path / "results.jsonl", settings, n=80)
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    code, err = calibrate(tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: the labelled rows lack members the heads of calibration {heads} read: {lacking}; ")
    assert not (tmp_path / "cal.json").exists()


def rows_with_dse(path, labels: np.ndarray, seed: int = 0) -> None:
    """Rows with AvgWD, EigenWD and DSE (what the white-box file's heads read without an answer), labelled ``labels``
    and drawn independently of them."""
    rng = np.random.default_rng(seed)
    fp = json.loads(path.with_name("settings.json").read_text())
    with path.open("w", encoding="utf-8") as f:
        for i, y in enumerate(labels):
            row = {
                "id": str(i),
                "source": "synthetic",
                "avg_wd": float(rng.normal(60, 15)),
                "eigen_wd": float(np.exp(rng.normal(18.6, 1.6))),
                "baselines": {"dse": float(rng.uniform(0, 2.3))},
                "label_em": int(y),
                "fingerprint": fp["fingerprint"],
            }
            f.write(json.dumps(row) + "\n")


@pytest.fixture
def noise(tmp_path):
    """100 rows whose labels the scores do not predict: the folder."""
    from blackbox_wd.settings import fingerprint

    (tmp_path / "settings.json").write_text(json.dumps({**SETTINGS, "fingerprint": fingerprint(SETTINGS)}))
    rows_with_dse(tmp_path / "results.jsonl", np.random.default_rng(1).permutation(np.arange(100) % 2))
    return tmp_path


@pytest.mark.parametrize("refit", ["prior", "map"])
def test_a_refit_worse_than_the_base_rate_on_labels_of_no_ranking_is_written_saying_so(noise, refit):
    """100 rows of noise: a refit judges them worse than their base rate out of fold (by how its folds' maps fit
    noise), but the labels show no ranking (the verdict's AUROC interval holds 0.5): the file is written, with the
    labelled AUROC and how many more labels would settle it, and the shipped heads kept (no candidate ranks noise
    clearly better). The map itself finds no slope: p' sits at the labelled base rate."""
    code, err = calibrate(noise, "--refit", refit)
    assert code == 0 and "written: the labels show little ranking (labelled AUROC 0.488 [0.379, 0.608])" in err, err
    assert "worse than their base rate only inside the noise of 100 rows: out-of-fold log-loss" in err, err
    assert "about 9012 more labelled rows would likely settle it" in err, err
    cv = Calibration.load(noise / "cal.json").fitted_on.cv
    assert cv["log_loss_oof"] > 0.693 and cv["auroc_low"] < 0.5 < cv["auroc_high"]
    if refit == "map":
        assert "kept the shipped heads (labelled AUROC 0.488 [0.379, 0.608]): the best candidate, log_eigen_wd" in err
        assert cv["slope"] == 0.01 and abs(cv["intercept"]) < 0.05


@pytest.fixture
def reversed_labels(tmp_path):
    """100 rows labelled against the white-box file's ranking (its 50 highest p correct): the folder."""
    from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS
    from blackbox_wd.settings import fingerprint

    (tmp_path / "settings.json").write_text(json.dumps({**SETTINGS, "fingerprint": fingerprint(SETTINGS)}))
    rows_with_dse(tmp_path / "results.jsonl", np.zeros(100))
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    p = [Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.json").verdict(r).p for r in rows]
    below = np.argsort(np.argsort(p)) < 50
    lines = [json.dumps({**r, "label_em": int(low)}) for r, low in zip(rows, below, strict=True)]
    (tmp_path / "results.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_a_prior_refit_on_labels_that_rank_against_it_is_refused_unless_forced(reversed_labels):
    """Labels that rank the rows clearly against the base (AUROC 0), and a refit that keeps the base's spread of p
    (``--refit prior``): worse than the base rate beyond the noise: refused, unless forced."""
    noise, refit = reversed_labels, "prior"
    code, err = calibrate(noise, "--refit", refit)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"error: the {refit} refit judges the labelled rows worse than their base rate, so nothing")
    assert "against 0.693 and 0.250 for p = 0.500 (the labelled base rate) on every row" in err, err
    assert not (noise / "cal.json").exists()
    code, err = calibrate(noise, "--refit", refit, "--force")
    assert code == 0 and "written with --force although it judges worse than the base rate: out-of-fold" in err, err
    cv = Calibration.load(noise / "cal.json").fitted_on.cv
    assert cv["log_loss_oof"] > 0.693 or cv["brier_oof"] > 0.25


def test_a_full_fit_worse_than_the_base_rate_is_refused(noise):
    code, err = calibrate(noise, "--refit", "full", "--folds", "4")
    assert code == 2 and err.startswith("error: the full fit judges the labelled rows worse than their base rate"), err
    assert not (noise / "cal.json").exists()


def test_what_a_row_lacks_is_read_from_the_head_a_row_like_it_has_members_for():
    from blackbox_wd.calibration.recalibrate import row_lacks
    from tests.calibration.test_teacher_free import calibration, head

    base = calibration(
        (
            head(("avg_wd", "answer_wd", "ls", "dse")),
            head(("avg_wd", "ls", "dse")),
            head(("avg_wd", "lne")),
            head(("avg_wd",)),
        )
    )
    short, passage = {"token_counts": [3, 3, 3]}, {"token_counts": [200, 200, 200]}
    full = {**short, "avg_wd": 1.0, "answer_wd": 2.0, "baselines": {"ls": 0.1, "dse": 0.5}}
    assert row_lacks(base, full, 10) == ()
    assert row_lacks(base, {**full, "answer_wd": None}, 10) == ()  # no judged answer: the head without it
    assert row_lacks(base, {**full, "baselines": {"dse": 0.5}}, 10) == ("ls",)
    assert row_lacks(base, {**short, "avg_wd": 1.0}, 10) == ("ls", "dse")  # AvgWD alone: what the rows of #59 were
    assert row_lacks(base, {**passage, "avg_wd": 1.0, "baselines": {"ls": 0.1}}, 10) == ()  # no DSE on a passage
    assert row_lacks(base, {**short, "avg_wd": 1.0, "lne": 0.3, "baselines": {"ls": 0.1, "dse": 0.5}}, 10) == ()
