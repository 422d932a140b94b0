"""Answer text as the labels and the baselines read it: SQuAD normalisation and ROUGE-L.

Below ``baselines``, ``eval`` and ``calibration``: the exact-match label and answer-equivalence DSE
share :func:`em_key`, the ROUGE-L label and LS share :func:`rouge_l_f1`.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from rapidfuzz.distance import LCSseq

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


class RememberedStems:
    """A stemmer whose stem of each word is worked out once (it never changes): Porter's rules are most of the peers'
    time (``bench/speed/verdict_cost.py``), and the samples of a prompt repeat their words."""

    def __init__(self, stemmer: Any) -> None:
        self.stem = lru_cache(maxsize=1 << 16)(stemmer.stem)


@lru_cache(maxsize=2)
def rouge_tokenizer(stem: bool = False) -> Any:
    """rouge-score's default tokenizer (lower-cased [a-z0-9] runs), with its Porter stemmer when ``stem`` (words of
    more than 3 letters stemmed, each word's stem remembered), as ``RougeScorer([...], use_stemmer=stem)`` reads a
    text."""
    from rouge_score.tokenizers import DefaultTokenizer  # rouge_score loads nltk: kept off the scoring path

    tokenizer = DefaultTokenizer(use_stemmer=stem)
    if stem:  # the tokenizer calls its stemmer's stem(word) for each word (rouge_score 0.1.2, tokenize.tokenize)
        tokenizer._stemmer = RememberedStems(tokenizer._stemmer)
    return tokenizer


def rouge_tokens(text: str) -> tuple[str, ...]:
    """rouge-score's tokens of ``text``: its default tokenizer, no stemming (lowercase [a-z0-9] runs)."""
    return tuple(rouge_tokenizer().tokenize(text))


def token_rouge_l_f1(reference: Sequence[str], response: Sequence[str]) -> float:
    """ROUGE-L F1 of two token sequences, as rouge-score computes it (0 when either is empty); the longest common
    subsequence from RapidFuzz (``LCSseq``, bit-parallel in C++).

    >>> round(token_rouge_l_f1("the cat sat on the mat".split(), "a cat sat the mat".split()), 4)  # LCS 4 of 6, 5
    0.7273
    """
    return overlap_f1(LCSseq.similarity(reference, response), len(reference), len(response))


def overlap_f1(overlap: int, n_a: int, n_b: int) -> float:
    """F1 of an overlap of sequences of ``n_a`` and ``n_b`` tokens (precision over b, recall over a; 0 without one),
    as rouge-score's ``scoring.fmeasure`` reads ROUGE-1's unigram overlap and ROUGE-L's longest common subsequence."""
    if overlap == 0:
        return 0.0
    precision, recall = overlap / n_b, overlap / n_a
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


_NUMBER = re.compile(r"[-+]?(?:\d+/\d+|\d+(?:\.\d+)?|\.\d+)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_NUMBER_WORDS = {
    word: float(n)
    for n, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}


@lru_cache(maxsize=4096)
def number_of(text: str) -> tuple[float, str] | None:
    """The one number an answer gives and the rest of its words (``em_key`` of the text without it), or None when
    it gives none or several. Thousands separators are read out (``1,400``), a fraction ``a/b`` is its value, and a
    number word from zero to twenty counts only as the whole answer.

    >>> number_of("$1,400"), number_of("33 dollars"), number_of("Two"), number_of("36 dollars + 36 cents")
    ((1400.0, ''), (33.0, 'dollars'), (2.0, ''), None)
    """
    plain = _THOUSANDS.sub("", text)
    found = _NUMBER.findall(plain)
    if not found:
        word = em_key(text)
        return (_NUMBER_WORDS[word], "") if word in _NUMBER_WORDS else None
    if len(found) > 1:
        return None
    head, slash, tail = found[0].partition("/")
    if slash and float(tail) == 0:
        return None
    value = float(head) / float(tail) if slash else float(head)
    return value, normalize_answer(_NUMBER.sub(" ", plain, count=1))


def same_answer(a: str, b: str) -> bool:
    """Two short answers say the same: when each gives one number (``number_of``), the same number with the same
    other words or none on one side (``$33`` and ``33 dollars``); else equal after SQuAD normalisation (``em_key``,
    which would read ``15.3`` as ``153``).

    >>> same_answer("The Griswolds", "griswolds"), same_answer("$33", "33 dollars"), same_answer("15.3", "153")
    (True, True, False)
    >>> same_answer("27 days", "60 days"), same_answer("Apollo 11", "Gemini 11"), same_answer("2", "two")
    (False, False, True)
    """
    x, y = number_of(a), number_of(b)
    if x is None or y is None:
        return em_key(a) == em_key(b)
    same = math.isclose(x[0], y[0], rel_tol=1e-9, abs_tol=1e-12)
    return same and (x[1] == y[1] or not x[1] or not y[1])


def answer_disagreement(answer: str, samples: Sequence[str]) -> float:
    """The share of the samples that do not give the judged answer (``same_answer``): 1 - self-consistency.

    >>> answer_disagreement("14", ["14", "14.0", "16", "1.4"])
    0.5
    """
    if not samples:
        raise ValueError("answer agreement needs at least one sample")
    return 1.0 - sum(same_answer(answer, s) for s in samples) / len(samples)
