"""Answer text as the labels and the baselines read it: SQuAD normalisation and ROUGE-L.

Below ``baselines``, ``eval`` and ``calibration``: the exact-match label and answer-equivalence DSE
share :func:`em_key`, the ROUGE-L label and LS share :func:`rouge_l_f1`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rouge-score imports nltk (~1.5 s): loaded on first use, not on the path of `bbwd score`
    from rouge_score.rouge_scorer import RougeScorer

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


@lru_cache(maxsize=1)
def _scorer() -> RougeScorer:
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l_f1(reference: str, response: str) -> float:
    """ROUGE-L F1 (rouge-score, no stemming; symmetric in its arguments)."""
    return float(_scorer().score(reference, response)["rougeL"].fmeasure)


def normalize_answer(s: str) -> str:
    """SQuAD v1.1 normalisation: lowercase, remove punctuation, articles and extra whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def max_rouge_l(response: str, answers: Sequence[str]) -> float:
    """Largest ROUGE-L F1 of the response against any reference (0 with no references)."""
    return max((rouge_l_f1(a, response) for a in answers), default=0.0)


def has_rouge_tokens(text: str) -> bool:
    """rouge-score keeps only [a-z0-9] runs: '---' or Japanese text have no tokens at all."""
    from rouge_score.tokenize import tokenize

    return bool(tokenize(text, None))


def em_key(text: str) -> str:
    """SQuAD normalisation, or lowercase/whitespace only when that leaves nothing ('A+', '---')."""
    return normalize_answer(text) or " ".join(text.lower().split())
