"""Answer text as the labels and the baselines read it: SQuAD normalisation and ROUGE-L.

Below ``baselines``, ``eval`` and ``calibration``: the exact-match label and answer-equivalence DSE
share :func:`em_key`, the ROUGE-L label and LS share :func:`rouge_l_f1`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from functools import lru_cache

from rapidfuzz.distance import LCSseq

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def rouge_tokens(text: str) -> tuple[str, ...]:
    """rouge-score's tokens of ``text``: its default tokenizer, no stemming (lowercase [a-z0-9] runs)."""
    from rouge_score.tokenize import tokenize  # rouge_score loads nltk: kept off the scoring path (test_startup)

    return tuple(tokenize(text, None))


def token_rouge_l_f1(reference: Sequence[str], response: Sequence[str]) -> float:
    """ROUGE-L F1 of two token sequences, as rouge-score computes it (0 when either is empty); the longest common
    subsequence from RapidFuzz (``LCSseq``, bit-parallel in C++).

    >>> round(token_rouge_l_f1("the cat sat on the mat".split(), "a cat sat the mat".split()), 4)  # LCS 4 of 6, 5
    0.7273
    """
    lcs = LCSseq.similarity(reference, response)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(response), lcs / len(reference)
    return 2 * precision * recall / (precision + recall)


def rouge_l_f1(reference: str, response: str) -> float:
    """ROUGE-L F1 (rouge-score's tokens, no stemming; symmetric in its arguments): equal to
    ``RougeScorer(["rougeL"]).score(reference, response)["rougeL"].fmeasure``."""
    return token_rouge_l_f1(rouge_tokens(reference), rouge_tokens(response))


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
    return bool(rouge_tokens(text))


@lru_cache(maxsize=4096)
def em_key(text: str) -> str:
    """SQuAD normalisation, or lowercase/whitespace only when that leaves nothing ('A+', '---'); memoised, as DSE's
    exact-match judge asks it of every response once per pair."""
    return normalize_answer(text) or " ".join(text.lower().split())
