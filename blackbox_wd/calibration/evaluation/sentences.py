"""The sentence level (SelfCheckGPT's AUC-PR): the labelled sentences of judged answers, with their scores.

A row carries ``sentence_labels`` (one of ``labels.SENTENCE_LABELS`` per sentence of the judged answer) with
``sentences`` (as many {"text", "start", "end", "score"} objects; None: none scored).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from blackbox_wd.calibration.evaluation.labels import SEVERITY, Rows, rows_with
from blackbox_wd.calibration.evaluation.metrics import N_BOOTSTRAP, SEED, SentenceAucPr, sentence_auc_pr


@dataclass(frozen=True)
class SentenceLevel:
    """The three sentence-level AUC-PRs of bbwd's sentence score, over ``sentences`` labelled sentences of
    ``answers`` judged answers."""

    auc_pr: SentenceAucPr
    sentences: int
    answers: int


def sentence_arrays(results: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Severity, score (NaN: none) and result index of every sentence with a label.

    Parameters
    ----------
    results : Rows

    Returns
    -------
    tuple of three ndarray
        (severity, score, passage), one entry per labelled sentence.

    Raises
    ------
    ValueError
        Naming a result whose scored ``sentences`` and ``sentence_labels`` differ in number.
    """
    severity: list[int] = []
    scores: list[float] = []
    passage: list[int] = []
    for n, r in enumerate(results):
        labels = r.get("sentence_labels") or []
        scored = r.get("sentences")
        if scored is not None and len(scored) != len(labels):
            raise ValueError(
                f"result {r.get('id', n)}: {len(scored)} scored 'sentences' for {len(labels)} 'sentence_labels'"
            )
        severity += [SEVERITY[label] for label in labels]
        scores += [np.nan if s["score"] is None else s["score"] for s in scored] if scored else [np.nan] * len(labels)
        passage += [n] * len(labels)
    return np.array(severity, dtype=int), np.array(scores, dtype=float), np.array(passage, dtype=int)


def sentence_level(results: Rows, n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> SentenceLevel | None:
    """NonFact, NonFact* and Factual AUC-PR of the sentence score over the rows with sentence labels.

    Parameters
    ----------
    results : Rows
    n_boot : int, default=N_BOOTSTRAP
    seed : int, default=SEED

    Returns
    -------
    SentenceLevel or None
        None when no row has sentence labels.
    """
    rows = rows_with(results, "sentence_labels")
    if not rows:
        return None
    arrays = sentence_arrays(rows)
    return SentenceLevel(sentence_auc_pr(*arrays, n_boot=n_boot, seed=seed), int(arrays[0].size), len(rows))
