"""bbwd's Porter stems against NLTK's ``PorterStemmer()`` (the stems rouge-score reads), word for word."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from nltk.stem.porter import PorterStemmer

from blackbox_wd.signals.answers.text import porter_measure, porter_stem

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

# Stems that meet each rule's conditions and fail them (m = 0, 1, 2; *o, *d, y after a vowel or a consonant), each
# with every suffix a step reads and pairs of them, so that every rule fires, and is refused, somewhere.
STEMS = (
    "tr",
    "b",
    "sp",
    "hop",
    "fil",
    "fail",
    "rel",
    "control",
    "gener",
    "conflat",
    "oat",
    "ivy",
    "toy",
    "syzyg",
    "radic",
    "analog",
    "hope",
    "plaster",
    "feed",
    "agr",
    "bl",
    "siz",
    "tann",
    "fizz",
    "hiss",
    "fall",
    "formal",
    "y",
)
SUFFIXES = (
    "",
    "s",
    "es",
    "ies",
    "sses",
    "ss",
    "ed",
    "eed",
    "ied",
    "ing",
    "y",
    "ational",
    "tional",
    "enci",
    "anci",
    "izer",
    "bli",
    "abli",
    "alli",
    "entli",
    "eli",
    "ousli",
    "ization",
    "ation",
    "ator",
    "alism",
    "iveness",
    "fulness",
    "ousness",
    "aliti",
    "iviti",
    "biliti",
    "fulli",
    "logi",
    "icate",
    "ative",
    "alize",
    "iciti",
    "ical",
    "ful",
    "ness",
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "sion",
    "tion",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
    "e",
    "ll",
    "at",
    "bl",
    "iz",
)
IRREGULAR = (
    "sky",
    "skies",
    "dying",
    "lying",
    "tying",
    "news",
    "innings",
    "inning",
    "outings",
    "outing",
    "cannings",
    "canning",
    "howe",
    "proceed",
    "exceed",
    "succeed",
    "dies",
    "died",
    "spied",
    "flies",
    "ties",
    "tied",
)


def vocabulary() -> set[str]:
    """Every [a-z0-9] word of the fixtures, the stems with each suffix and pairs of them, runs of y, short words."""
    words = {w for path in FIXTURES.glob("*.json*") for w in re.findall(r"[a-z0-9]+", path.read_text().lower())}
    words |= {s + a for s, a in itertools.product(STEMS, SUFFIXES)}
    words |= {s + a + b for s, a, b in itertools.product(STEMS, SUFFIXES, SUFFIXES)}
    words |= {"y" * n for n in range(1, 8)} | {"a" + "y" * n + "ing" for n in range(1, 6)} | set(IRREGULAR)
    words |= {"".join(p) for p in itertools.product("aeybt", repeat=3)} | {"a", "by", "2011", "1980s", "mp3s"}
    return words


def test_every_stem_is_nltks() -> None:
    reference = PorterStemmer().stem
    words = vocabulary()
    assert len(words) > 100_000  # the fixtures' words are a few thousand; the combinations the rest
    differ = [(w, porter_stem(w), reference(w)) for w in sorted(words) if porter_stem(w) != reference(w)]
    assert differ == []


@pytest.mark.parametrize(
    ("word", "expected"),
    # Porter's own examples (1980), and NLTK's departures from them
    [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("cats", "cat"),
        ("agreed", "agre"),
        ("plastered", "plaster"),
        ("motoring", "motor"),
        ("hopping", "hop"),
        ("filing", "file"),
        ("happy", "happi"),
        ("relational", "relat"),
        ("triplicate", "triplic"),
        ("revival", "reviv"),
        ("controll", "control"),
        ("generalizations", "gener"),
        ("dies", "die"),
        ("spied", "spi"),
        ("enjoy", "enjoy"),
        ("skies", "sky"),
        ("radicalli", "radic"),
        ("analogi", "analog"),
        ("OATS", "oat"),
    ],
)
def test_the_papers_examples(word: str, expected: str) -> None:
    assert porter_stem(word) == expected


def test_measure_counts_vowel_consonant_runs() -> None:
    # the paper's examples of m = 0, 1 and 2
    assert [porter_measure(w) for w in ("tr", "ee", "tree", "y", "by")] == [0] * 5
    assert [porter_measure(w) for w in ("trouble", "oats", "trees", "ivy")] == [1] * 4
    assert [porter_measure(w) for w in ("troubles", "private", "oaten", "orrery")] == [2] * 4
