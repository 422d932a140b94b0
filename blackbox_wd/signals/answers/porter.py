"""Porter's suffix-stripping rules as NLTK's ``PorterStemmer()`` applies them (its default mode, NLTK_EXTENSIONS), the
stems rouge-score's ``use_stemmer=True`` reads: here so that reading ROUGE does not import nltk, whose package init
takes about a second (it imports scikit-learn and pandas for classifiers ROUGE never uses).

The rules are those of M. F. Porter, "An algorithm for suffix stripping" (1980), with NLTK's departures from it: a
short table of irregular forms, words of one or two letters left alone, "ies"/"ied" of four letters to "ie", y to i
only after a consonant that does not start the word, "alli" stripped again after step 2, "bli" -> "ble", "fulli" ->
"ful" and "logi" -> "log", and a two-letter vowel-consonant stem counted as *o. Equal to NLTK's stems on every word
the tests give it (``tests/signals/test_porter.py``).
"""

from __future__ import annotations

from collections.abc import Callable

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

Condition = Callable[[str], bool] | None
Rule = tuple[str, str, Condition]


def _consonants(word: str) -> list[bool]:
    """Whether each letter is a consonant: not a, e, i, o or u, and a y only where it starts the word or follows a
    vowel."""
    flags: list[bool] = []
    for i, ch in enumerate(word):
        flags.append(ch not in _VOWELS and (ch != "y" or i == 0 or not flags[i - 1]))
    return flags


def measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant runs in [C](VC){m}[V].

    >>> [measure(w) for w in ("tree", "trouble", "troubles", "by")]
    [0, 1, 2, 0]
    """
    flags = _consonants(stem)
    return sum(1 for i in range(1, len(flags)) if flags[i] and not flags[i - 1])


def _positive(stem: str) -> bool:
    return measure(stem) > 0


def _above_one(stem: str) -> bool:
    return measure(stem) > 1


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


def _apply(word: str, rules: list[Rule]) -> str:
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
        return word[:-3] + "ee" if measure(word[:-3]) > 0 else word
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
            ("", "e", lambda s: measure(s) == 1 and _ends_cvc(s)),
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
    rules: list[Rule] = [(suffix, replacement, _positive) for suffix, replacement in _STEP2]
    rules.append(("logi", "log", lambda _: _positive(word[:-3])))  # the "l" counted with the stem
    return _apply(word, rules)


_STEP3: list[Rule] = [
    ("icate", "ic", _positive),
    ("ative", "", _positive),
    ("alize", "al", _positive),
    ("iciti", "ic", _positive),
    ("ical", "ic", _positive),
    ("ful", "", _positive),
    ("ness", "", _positive),
]

_STEP4: list[Rule] = [
    *((suffix, "", _above_one) for suffix in ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement")),
    *((suffix, "", _above_one) for suffix in ("ment", "ent")),
    ("ion", "", lambda s: measure(s) > 1 and s[-1] in "st"),
    *((suffix, "", _above_one) for suffix in ("ou", "ism", "ate", "iti", "ous", "ive", "ize")),
]


def _step5a(word: str) -> str:
    if word.endswith("e"):
        m = measure(word[:-1])
        if m > 1 or (m == 1 and not _ends_cvc(word[:-1])):
            return word[:-1]
    return word


def _step5b(word: str) -> str:
    return _apply(word, [("ll", "l", lambda _: measure(word[:-1]) > 1)])


def stem(word: str) -> str:
    """A word's stem as NLTK's ``PorterStemmer().stem`` gives it (the word lower-cased first).

    Parameters
    ----------
    word : str
        One word.

    Returns
    -------
    str
        Its stem.

    >>> [stem(w) for w in ("caresses", "ponies", "relational", "hopping", "generalizations", "skies")]
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
