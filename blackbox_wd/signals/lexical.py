"""The lexical sentence signal: how surprising a sentence's rarest word is among the samples.

SelfCheck-Unigram's (max) score, with no model: a unigram model with add-one smoothing is counted over the
words of the K samples and the judged answer, and a sentence scores the largest surprise of its words,

    unigram_n = max_{w in sentence n} -ln p(w),    p(w) = (c(w) + 1) / (N + V),

with c(w) the count of the word, N the words counted and V the distinct ones. A name or a number that no
sample repeats scores high; the OT sentence score (``wd.sentence_scores``) sees meaning and misses
exactly those, which is why the sentence verdict reads both. Words are runs of letters and digits,
lower-cased.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """The lower-cased words of a text (runs of ``\\w``)."""
    return WORD.findall(text.lower())


def unigram_surprise(sentences: Sequence[str], samples: Sequence[str], answer: str) -> list[float | None]:
    """Each sentence's largest word surprise under the unigram counts of the samples and the answer.

    Parameters
    ----------
    sentences : sequence of str
        The answer's sentences.
    samples : sequence of str
        The K sampled responses.
    answer : str
        The judged answer (its words are counted too, as SelfCheck-Unigram counts the passage).

    Returns
    -------
    list of float or None
        ``max -ln p(w)`` over each sentence's words, in nats; None for a sentence without a word.

    Examples
    --------
    >>> s = unigram_surprise(["Paris is big.", "Bob"], ["Paris is big."], "Paris is big. Bob")
    >>> [round(x, 3) for x in s]  # 7 words counted, 4 distinct: p(paris) = 3/11, p(bob) = 2/11
    [1.299, 1.705]
    """
    counts = Counter(words(" ".join((*samples, answer))))  # one pass: a space ends every text's last word
    total = sum(counts.values()) + len(counts)
    out: list[float | None] = []
    for sentence in sentences:
        found = words(sentence)
        out.append(max(math.log(total / (counts[w] + 1)) for w in found) if found else None)
    return out


def answer_unigram(scores: Sequence[float | None]) -> float | None:
    """The answer's lexical score: the mean of its sentences' (None when none has one)."""
    known = [s for s in scores if s is not None]
    return sum(known) / len(known) if known else None
