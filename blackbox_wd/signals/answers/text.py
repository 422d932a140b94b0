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
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from rapidfuzz.distance import LCSseq
from rapidfuzz.process import cdist

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


# Porter's suffix-stripping rules as NLTK's ``PorterStemmer()`` applies them (its default mode, NLTK_EXTENSIONS), the
# stems rouge-score's ``use_stemmer=True`` reads: here so that reading ROUGE does not import nltk, whose package init
# takes about a second (it imports scikit-learn and pandas for classifiers ROUGE never uses). The rules of M. F.
# Porter, "An algorithm for suffix stripping" (1980), with NLTK's departures from them: a short table of irregular
# forms, words of one or two letters left alone, "ies"/"ied" of four letters to "ie", y to i only after a consonant
# that does not start the word, "alli" stripped again after step 2, "bli" -> "ble", "fulli" -> "ful" and "logi" ->
# "log", and a two-letter vowel-consonant stem counted as *o. Equal to NLTK's stems on every word the tests give
# (``tests/signals/test_porter.py``).

_VOWELS = frozenset("aeiou")

# NLTK's irregular forms, read before any rule.
_IRREGULAR = {
    "sky": "sky",
    "skies": "sky",
    "dying": "die",
    "lying": "lie",
    "tying": "tie",
    "news": "news",
    "innings": "inning",
    "inning": "inning",
    "outings": "outing",
    "outing": "outing",
    "cannings": "canning",
    "canning": "canning",
    "howe": "howe",
    "proceed": "proceed",
    "exceed": "exceed",
    "succeed": "succeed",
}

_Condition = Callable[[str], bool] | None
_Rule = tuple[str, str, _Condition]


def _consonants(word: str) -> list[bool]:
    """Whether each letter is a consonant: not a, e, i, o or u, and a y only where it starts the word or follows a
    vowel."""
    flags: list[bool] = []
    for i, ch in enumerate(word):
        flags.append(ch not in _VOWELS and (ch != "y" or i == 0 or not flags[i - 1]))
    return flags


def porter_measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant runs in [C](VC){m}[V].

    >>> [porter_measure(w) for w in ("tree", "trouble", "troubles", "by")]
    [0, 1, 2, 0]
    """
    flags = _consonants(stem)
    return sum(1 for i in range(1, len(flags)) if flags[i] and not flags[i - 1])


def _positive(stem: str) -> bool:
    return porter_measure(stem) > 0


def _above_one(stem: str) -> bool:
    return porter_measure(stem) > 1


def _has_vowel(stem: str) -> bool:
    return not all(_consonants(stem))


def _ends_double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonants(word)[-1]


def _ends_cvc(word: str) -> bool:
    """Porter's *o (consonant, vowel, consonant, the last not w, x or y), or NLTK's two-letter vowel-consonant."""
    flags = _consonants(word)
    if len(word) >= 3:
        return flags[-3] and not flags[-2] and flags[-1] and word[-1] not in "wxy"
    return len(word) == 2 and not flags[0] and flags[1]


def _apply(word: str, rules: list[_Rule]) -> str:
    """The first rule whose suffix the word ends with, applied where its condition holds on the stem; the word
    unchanged where it does not (no later rule is tried). The suffix "*d" is a double consonant, losing one letter."""
    for suffix, replacement, condition in rules:
        if suffix == "*d":
            if not _ends_double_consonant(word):
                continue
            stem = word[:-2]
        elif word.endswith(suffix):
            stem = word[: len(word) - len(suffix)]
        else:
            continue
        return stem + replacement if condition is None or condition(stem) else word
    return word


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:
        return word[:-3] + "ie"
    return _apply(word, [("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)])


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return word[:-3] + ("ie" if len(word) == 4 else "i")
    if word.endswith("eed"):
        return word[:-3] + "ee" if porter_measure(word[:-3]) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            stem = word[: -len(suffix)]
            break
    else:
        return word
    return _apply(
        stem,
        [
            ("at", "ate", None),
            ("bl", "ble", None),
            ("iz", "ize", None),
            ("*d", stem[-1], lambda _: stem[-1] not in "lsz"),
            ("", "e", lambda s: porter_measure(s) == 1 and _ends_cvc(s)),
        ],
    )


def _step1c(word: str) -> str:
    return _apply(word, [("y", "i", lambda s: len(s) > 1 and _consonants(s)[-1])])


_STEP2 = [
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("fulli", "ful"),
]


def _step2(word: str) -> str:
    if word.endswith("alli") and _positive(word[:-4]):
        return _step2(word[:-4] + "al")
    rules: list[_Rule] = [(suffix, replacement, _positive) for suffix, replacement in _STEP2]
    rules.append(("logi", "log", lambda _: _positive(word[:-3])))  # the "l" counted with the stem
    return _apply(word, rules)


_STEP3: list[_Rule] = [
    ("icate", "ic", _positive),
    ("ative", "", _positive),
    ("alize", "al", _positive),
    ("iciti", "ic", _positive),
    ("ical", "ic", _positive),
    ("ful", "", _positive),
    ("ness", "", _positive),
]

_STEP4: list[_Rule] = [
    *((suffix, "", _above_one) for suffix in ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement")),
    *((suffix, "", _above_one) for suffix in ("ment", "ent")),
    ("ion", "", lambda s: porter_measure(s) > 1 and s[-1] in "st"),
    *((suffix, "", _above_one) for suffix in ("ou", "ism", "ate", "iti", "ous", "ive", "ize")),
]


def _step5a(word: str) -> str:
    if word.endswith("e"):
        m = porter_measure(word[:-1])
        if m > 1 or (m == 1 and not _ends_cvc(word[:-1])):
            return word[:-1]
    return word


def _step5b(word: str) -> str:
    return _apply(word, [("ll", "l", lambda _: porter_measure(word[:-1]) > 1)])


def porter_stem(word: str) -> str:
    """A word's stem as NLTK's ``PorterStemmer().stem`` gives it (the word lower-cased first).

    Parameters
    ----------
    word : str
        One word.

    Returns
    -------
    str
        Its stem.

    >>> [porter_stem(w) for w in ("caresses", "ponies", "relational", "hopping", "generalizations", "skies")]
    ['caress', 'poni', 'relat', 'hop', 'gener', 'sky']
    """
    word = word.lower()
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 2:
        return word
    for step in (_step1a, _step1b, _step1c, _step2):
        word = step(word)
    word = _apply(_apply(word, _STEP3), _STEP4)
    return _step5b(_step5a(word))


_WORDS = re.compile(r"[a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")  # rouge-score's VALID_TOKEN_RE, read after stemming


@lru_cache(maxsize=1 << 16)
def stemmed(word: str) -> str:
    """A word's token as rouge-score stems it (words of more than 3 letters, by NLTK's Porter rules: ``porter_stem``),
    "" where that is not a [a-z0-9] run (it drops it); each word worked out once, as it never changes: Porter's rules
    were most of the peers' time (``bench/speed/verdict_cost.py``), and the samples of a prompt repeat their words."""
    token = porter_stem(word) if len(word) > 3 else word
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
