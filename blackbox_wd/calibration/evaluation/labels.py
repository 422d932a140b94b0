"""The label vocabulary: the labels a scored row may carry, what each means, and the rows that carry one.

A 0/1 label (``LABEL_KEYS``) is 1 = hallucination, 0 = correct; a continuous one (``CONTINUOUS_KEYS``, the passage
labels of ``records``) is higher = more hallucination. A judged answer's sentences carry one of ``SENTENCE_LABELS``
each (``SEVERITY``: the ``metrics.ACCURATE``, ``MINOR`` and ``MAJOR`` of the sentence tasks, ``TASK_NAMES``), its
claims one of ``CLAIM_LABELS``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np

from blackbox_wd.records import PASSAGE_LABELS

Rows: TypeAlias = Sequence[Mapping[str, Any]]  # scored rows (results.jsonl's objects)

LABEL_KEYS = ("label", "label_em", "label_first", "label_em_first", "label_judge")
LABEL_NAMES = {
    "label": "ROUGE-L >= 0.5 (QA) / equivalent final answer (MATH) of the judged answer",
    "label_em": "exact match / containment (QA) of the judged answer",
    "label_first": "ROUGE-L >= 0.5 (QA) / equivalent final answer (MATH) of the first sample",
    "label_em_first": "exact match / containment (QA) of the first sample",
    "label_judge": "LLM judge through the API client, of the judged answer",
}
RECORDED_LABEL = "from the data file (1 = the judged answer is hallucinated)"
CONTINUOUS_KEYS = PASSAGE_LABELS  # continuous labels, higher = more hallucination: Pearson and Spearman
CONTINUOUS_NAMES = {
    "human_score": "human score of the judged answer (mean of 0 accurate / 0.5 minor / 1 major "
    "inaccurate over its sentences)",
    "unsupported_share": "share of the judged answer's claims labelled unsupported, of those labelled",
}
SENTENCE_LABELS = ("accurate", "minor_inaccurate", "major_inaccurate")
SEVERITY = {label: n for n, label in enumerate(SENTENCE_LABELS)}  # metrics' ACCURATE, MINOR, MAJOR
NONFACT = SENTENCE_LABELS[1:]  # a sentence minor or major inaccurate: not factual
TASK_NAMES = {"nonfact": "NonFact", "nonfact_star": "NonFact*", "factual": "Factual"}  # metrics.SENTENCE_TASKS
CLAIM_LABELS = ("supported", "unsupported", "other")  # of the judged answer's claims; other: not evaluable


def rows_with(rows: Rows, key: str) -> list[Mapping[str, Any]]:
    """The rows that carry ``key`` (math items have no ``label_em``; a judge may not answer).

    Parameters
    ----------
    rows : Rows
    key : str
        A label's key (or any field's).

    Returns
    -------
    list of mapping
        The rows whose ``key`` is not None, in order.
    """
    return [r for r in rows if r.get(key) is not None]


def label_array(rows: Rows, key: str = "label") -> np.ndarray:
    """The 0/1 labels under ``key``.

    Parameters
    ----------
    rows : Rows
    key : str, default="label"

    Returns
    -------
    ndarray of int

    Raises
    ------
    KeyError
        A row lacks ``key``.
    """
    return np.array([int(r[key]) for r in rows], dtype=int)
