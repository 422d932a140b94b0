"""Which sentence is wrong: an answer's sentences scored from the transport plans of its AnswerWD.

The judged answer has m tokens with character spans in its text. For each sample k, the exact
optimal plan P^k between the answer's uniform measure and sample k's (the solve AnswerWD already
does) gives each answer token t its cost c_kt = m * sum_j P^k_tj C_tj (``transport.token_costs_to_each``),
so that mean_t c_kt = EMD2(answer, sample k). Sentence n with token set T_n scores

    score_n = sqrt( min_k mean_{t in T_n} c_kt ),

the W2-like cost of explaining the sentence by the sample that explains it best: higher = more likely
unsupported (``wd.sentence_scores``). A token belongs to the sentence that holds most of its
characters (ties: the earlier sentence); a token with no character in any sentence (whitespace between
sentences) belongs to none; a sentence with no token scores None. The sentences are the record's own
(:func:`locate`) or spaCy's rule-based sentencizer's (:func:`split`); spaCy is imported on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

import numpy as np

from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.wd import sentence_scores


@dataclass(frozen=True)
class Span:
    """A sentence of a text: ``text == whole[start:end]``, character offsets."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class SentenceScore:
    """A sentence of the judged answer (character offsets into it) and its score (None: it holds no token)."""

    text: str
    start: int
    end: int
    score: float | None
    unigram: float | None = None  # the surprise of its rarest word among the samples (``lexical``)
    p_hallucination: float | None = None  # with a calibration's sentence head: its probability
    flag: bool | None = None  # with a calibration's sentence head: p_hallucination reaches its threshold


def sentence_dicts(sentences: Sequence[SentenceScore] | None) -> list[dict[str, Any]] | None:
    """Scored sentences as JSON objects ``{"text", "start", "end", "score", "unigram", "p_hallucination", "flag"}``
    (None stays None)."""
    return None if sentences is None else [asdict(s) for s in sentences]


@cache
def _sentencizer() -> Any:
    """spaCy's blank English pipeline with the rule-based sentencizer, built once per process."""
    import spacy  # seconds more on every process that imports the pipeline (-X importtime), for a passage only

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def split(text: str) -> list[Span]:
    """The sentences of a text by spaCy's rule-based sentencizer, without the whitespace around them."""
    out = []
    for sent in _sentencizer()(text).sents:
        inner = text[sent.start_char : sent.end_char]
        start = sent.start_char + len(inner) - len(inner.lstrip())
        end = sent.start_char + len(inner.rstrip())
        if end > start:
            out.append(Span(text[start:end], start, end))
    return out


def locate(text: str, sentences: Sequence[str]) -> list[Span]:
    """A text's own sentences as spans, each found in order after the previous one; BBWDError names one not found."""
    out, at = [], 0
    for i, sentence in enumerate(sentences):
        start = text.find(sentence, at)
        if start < 0:
            raise BBWDError(f"field 'sentences'[{i}] is not in the answer (after character {at}): {sentence[:60]!r}")
        at = start + len(sentence)
        out.append(Span(sentence, start, at))
    return out


def answer_spans(text: str, sentences: Sequence[str] | None = None) -> list[Span]:
    """The judged answer's sentences: its own ``sentences`` found in it (:func:`locate`), else spaCy's (:func:`split`).

    Parameters
    ----------
    text : str
        The answer.
    sentences : sequence of str or None
        Its own sentences, in order (a record's ``sentences``); None: spaCy splits it.

    Returns
    -------
    list of Span
    """
    return split(text) if sentences is None else locate(text, sentences)


def token_sentence(offsets: np.ndarray, spans: Sequence[Span]) -> np.ndarray:
    """The sentence of each token (its index in ``spans``, -1 for none): the one holding most of its characters."""
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    if not spans:
        return np.full(len(offsets), -1)
    bounds = np.array([(s.start, s.end) for s in spans], dtype=np.int64)
    overlap = np.minimum(offsets[:, 1:], bounds[None, :, 1]) - np.maximum(offsets[:, :1], bounds[None, :, 0])
    best = overlap.argmax(axis=1)  # the first of equal overlaps: the earlier sentence
    return np.where(overlap[np.arange(len(offsets)), best] > 0, best, -1)


def score_sentences(
    text: str, offsets: np.ndarray, token_costs: np.ndarray, sentences: Sequence[str] | None = None
) -> list[SentenceScore]:
    """The answer's sentences (:func:`answer_spans`) scored from its tokens' transport costs."""
    spans = answer_spans(text, sentences)
    scores = sentence_scores(token_costs, token_sentence(offsets, spans), len(spans))
    return [SentenceScore(s.text, s.start, s.end, v) for s, v in zip(spans, scores, strict=True)]
