"""Answer text as the labels and the baselines read it: SQuAD normalisation, rouge-score's tokens and ROUGE's F1.

Below ``baselines``, ``eval`` and ``calibration``: the exact-match label and answer-equivalence DSE
share :func:`em_key`; the ROUGE-L label reads :func:`rouge_l_f1`, LS and the peers the F1 of every pair of
distinct texts (:func:`distinct`, :func:`rouge_l_f1s`, :func:`overlap_f1s`, :func:`pair_mean`) over
:func:`rouge_tokens`, all rouge-score's values (``tests/signals/test_baselines.py``, ``tests/signals/test_peers.py``).
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from rapidfuzz.distance import LCSseq
from rapidfuzz.process import cdist

from blackbox_wd.signals.answers import porter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


_WORDS = re.compile(r"[a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")  # rouge-score's VALID_TOKEN_RE, read after stemming


@lru_cache(maxsize=1 << 16)
def stemmed(word: str) -> str:
    """A word's token as rouge-score stems it (words of more than 3 letters, by NLTK's Porter rules: ``porter.stem``),
    "" where that is not a [a-z0-9] run (it drops it); each word worked out once, as it never changes: Porter's rules
    were most of the peers' time (``bench/speed/verdict_cost.py``), and the samples of a prompt repeat their words."""
    token = porter.stem(word) if len(word) > 3 else word
    return token if _VALID.match(token) else ""


def rouge_tokens(text: str, stem: bool = False) -> tuple[str, ...]:
    """rouge-score's tokens of ``text`` (``tokenize.tokenize`` of rouge-score 0.1.2, as ``RougeScorer([...],
    use_stemmer=stem)`` reads a text): the lower-cased text's [a-z0-9] runs; with ``stem``, the words of more than 3
    letters stemmed by Porter's rules, and any token that is then not a [a-z0-9] run dropped.

    >>> rouge_tokens("The cats' 2 mats!"), rouge_tokens("The cats' 2 mats!", stem=True)
    (('the', 'cats', '2', 'mats'), ('the', 'cat', '2', 'mat'))
    """
    words = _WORDS.findall(text.lower())
    return tuple(filter(None, map(stemmed, words))) if stem else tuple(words)


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


def rouge_l_f1s(tokens: Sequence[Sequence[str]]) -> np.ndarray:
    """``token_rouge_l_f1`` of each pair of token sequences, as a square matrix (the longest common subsequences from
    RapidFuzz's ``cdist``, in C++).

    >>> rouge_l_f1s([("the", "cat", "sat"), ("a", "cat", "sat")]).round(4).tolist()
    [[1.0, 0.6667], [0.6667, 1.0]]
    """
    n = np.array([len(t) for t in tokens])
    return overlap_f1s(cdist(tokens, tokens, scorer=LCSseq.similarity), n)


def distinct(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct texts, in order of first appearance, and each text's index among them: sampled short answers
    repeat, and a pair's score is computed once per pair of distinct texts.

    >>> distinct(["a", "b", "a"])
    (['a', 'b'], array([0, 1, 0]))
    """
    first = {t: i for i, t in enumerate(dict.fromkeys(texts))}
    return list(first), np.array([first[t] for t in texts], dtype=int)


def pair_mean(m: np.ndarray, which: np.ndarray) -> float:
    """The mean over the pairs i < j of texts of ``m[which[i], which[j]]``, ``m`` a symmetric matrix over the distinct
    texts (``distinct``): each distinct pair weighted by how often its texts occur.

    >>> pair_mean(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0, 0, 1]))  # pairs (0, 0), (0, 1), (0, 1)
    0.3333333333333333
    """
    c = np.bincount(which, minlength=len(m)).astype(float)
    k = len(which)
    return float((c @ m @ c - c @ np.diag(m)) / (k * (k - 1)))


def overlap_f1s(overlap: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``overlap_f1`` of each pair of texts, from their overlaps (a square matrix) and token counts ``n``:
    entry (a, b) is ``overlap_f1(overlap[a, b], n[a], n[b])``, the same floating-point steps.

    >>> overlap_f1s(np.array([[3, 2], [2, 4]]), np.array([3, 4])).round(4).tolist()
    [[1.0, 0.5714], [0.5714, 1.0]]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        precision, recall = overlap / n[None, :], overlap / n[:, None]
        f1 = 2 * precision * recall / (precision + recall)
    return np.where(overlap > 0, f1, 0.0)


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
