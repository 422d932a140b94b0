"""The members a calibration's heads read: their names, the groups a result may lack, and how each is read from a
``Result``, a row dict or a sentence (``member_value``); what tables and pages call them (``MEMBER_NAMES``); the kinds
of answer heads are fitted for (``answer_kind``); the sentence verdicts aggregated over an answer
(``sentence_verdict``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from blackbox_wd.checks import is_finite_number as _number
from blackbox_wd.signals.baselines.peers import ANSWER_PEERS, PEERS

if TYPE_CHECKING:
    from blackbox_wd.calibration.heads import Head

FEATURES = ("avg_wd", "log_eigen_wd")  # the first calibrations' one head, and the head every result has
# read from a result's ``baselines``: the paper's baselines and the peers (``baselines.peers``)
BASELINE_MEMBERS = ("lne", "ls", "es", "er", "dse", *PEERS, *ANSWER_PEERS)
# What a head may read, each a number of a result (``member_value``); "log_" members are the log of the score.
MEMBERS = (
    "avg_wd",
    "log_eigen_wd",
    "log_eigen_wd_fixed",
    "answer_wd",
    "sentence_wd",
    "answer_unigram",
    "answer_disagreement",
    "sentence_verdict",
    "answer_nll",
    "cocoa",
    *BASELINE_MEMBERS,
)
ANSWER_LOGPROB_MEMBERS = ("answer_nll", "cocoa")  # only with a judged answer and the teacher's log-prob pass
# only with a judged answer; sentence_verdict also only under a calibration with a sentence head (``sentence_verdict``)
ANSWER_MEMBERS = (
    "answer_wd",
    "sentence_wd",
    "answer_unigram",
    "answer_disagreement",
    "sentence_verdict",
    *ANSWER_PEERS,
    *ANSWER_LOGPROB_MEMBERS,
)
# Members read from the texts alone, whatever the teacher: a head over these alone judges a run of any teacher
# (``Calibration.teacher_free``). DSE with its default judge, equal normalised answers.
TEACHER_FREE = ("ls", "dse", "answer_unigram", "answer_disagreement", *PEERS, *ANSWER_PEERS)
SENTENCE_MEMBERS = ("score", "unigram")  # of each sentence: its OT score and its lexical surprise
# of each claim: the answer's AvgWD (read from the result) and the claim's score (``claims.score_claims``: lex_share)
CLAIM_MEMBERS = ("avg_wd", "score")
# Members defined for short answers only (bench/RESULTS.md, "Short-answer members"): the paper's EigenWD, whose
# per-prompt bandwidth divides the scale of D out on a passage, and ES and ER, which read the last token's state as
# the answer's embedding; and the judged answer's disagreement with the samples, which a passage has with nearly every
# sample. A calibration fitted on passages reads them as missing on a passage (``is_passage``).
SHORT_ONLY = ("log_eigen_wd", "es", "er", "answer_disagreement")
PASSAGE_TOKENS = 128  # a passage: the median sample has at least this many tokens
PHRASE_TOKENS = 8  # a phrase (a name, a number): the median sample has fewer tokens than this
# The kinds of answer a calibration may have heads of its own for (``answer_kind``)
KINDS = ("phrase", "sentence", "passage")
# What tables, plots and pages call the members and the scores (``bbwd eval``'s methods, ``bbwd calibrate``'s heads'
# members, the report's estimators): the one table of display names (lm-polygraph's short names, for a line or a
# box: ``signals.names.PEER_SHORT_NAMES``)
MEMBER_NAMES = {
    "avg_wd": "AvgWD",
    "eigen_wd": "EigenWD",
    "log_eigen_wd": "EigenWD (log)",
    "log_eigen_wd_fixed": "EigenWD, fixed bandwidth (log)",
    "answer_wd": "AnswerWD",
    "sentence_wd": "SentenceWD",
    "answer_unigram": "lexical surprise (answer)",
    "answer_disagreement": "answer disagreement (1 - SC)",
    "sentence_verdict": "sentence verdicts (answer)",
    "answer_nll": "teacher's NLL of the answer",
    "cocoa": "CoCoA (NLL x AnswerWD)",
    "lne": "LNE",
    "ls": "LS",
    "es": "ES",
    "er": "ER",
    "dse": "DSE",
    "lexsim_rouge1": "LexSim ROUGE-1",
    "lexsim_rougel": "LexSim ROUGE-L",
    "eigval_jaccard": "EigValLaplacian (Jaccard)",
    "degmat_jaccard": "DegMat (Jaccard)",
    "ecc_jaccard": "Eccentricity (Jaccard)",
    "answer_rougel": "answer's ROUGE-L to the samples",
    "answer_degmat": "answer's degree (Jaccard)",
    "answer_ecc": "answer's eccentricity (Jaccard)",
    "score": "OT score (sentence)",  # a sentence's (a claim's: ``CLAIM_NAMES``)
    "unigram": "lexical surprise (sentence)",
}
# a claim's own member, ``score`` (``claims.score_claims``), beside its answer's AvgWD
CLAIM_NAMES = {**MEMBER_NAMES, "score": "claim score (share of samples lacking a key word)"}


def result_field(result: object, key: str) -> Any:
    """``result[key]`` of a mapping (a row), else its attribute ``key`` (a ``Result``, a sentence); None when it has
    none."""
    return result.get(key) if isinstance(result, Mapping) else getattr(result, key, None)


def member_value(result: object, name: str) -> float | None:
    """The member ``name`` of a ``Result``, a row dict or a sentence (attributes or keys), None when it has none.

    A "log_" member is the log of the score after the prefix (None unless that is > 0); a baseline is read from
    the result's ``baselines`` when it is not a field of its own (an eval row has them as fields).
    """
    if name.startswith("log_"):
        base = member_value(result, name[4:])
        return math.log(base) if base is not None and base > 0 else None
    value = result_field(result, name)
    if value is None and name in BASELINE_MEMBERS:
        value = (result_field(result, "baselines") or {}).get(name)
    return float(value) if _number(value) else None


def is_passage(result: object, k: int | None = None) -> bool:
    """True when the median of the token counts of a result's (first ``k``) samples is at least PASSAGE_TOKENS.

    >>> is_passage({"token_counts": [90, 130, 140]}), is_passage({"token_counts": [90, 130, 140]}, k=2)
    (True, False)
    """
    return answer_kind(result, k) == "passage"


def median_tokens(result: object, k: int | None = None) -> float | None:
    """The median token count of a result's (first ``k``) samples (None without one), as ``np.median`` gives it:
    sorted in Python, as a handful of counts sorts faster than numpy starts.

    >>> median_tokens({"token_counts": [90, 130, 140, 7]}), median_tokens({"token_counts": [90, 130]}, k=1)
    (110.0, 90.0)
    """
    counts = sorted(list(result_field(result, "token_counts") or [])[:k])
    if not counts:
        return None
    half = len(counts) // 2
    return float(counts[half]) if len(counts) % 2 else (counts[half - 1] + counts[half]) / 2.0


def answer_kind(result: object, k: int | None = None) -> str:
    """A result's kind of answer (``KINDS``), by the median token count of its (first ``k``) samples: "passage" (at
    least ``PASSAGE_TOKENS``), "sentence", or "phrase" (fewer than ``PHRASE_TOKENS``: a name, a number).

    >>> answer_kind({"token_counts": [3, 130, 200]}), answer_kind({"token_counts": [3, 30, 200]}, k=2)
    ('passage', 'sentence')
    >>> answer_kind({"token_counts": [3, 130, 200]}, k=1)
    'phrase'
    """
    median = median_tokens(result, k)
    if median is not None and median >= PASSAGE_TOKENS:
        return "passage"
    return "sentence" if median is not None and median >= PHRASE_TOKENS else "phrase"


def sentence_verdict(head: Head | None, sentences: Iterable[object] | None) -> float | None:
    """The sentence verdicts aggregated over an answer: the mean, over its sentences that have every member of the
    sentence ``head``, of their combined score z under it (None without a head or such a sentence).

    The mean, as SentenceWD, the lexical surprise and SelfCheckGPT's passage score are means; z, not p, so that a
    ``mean`` sentence head (the shipped one: nothing fitted but the scales) carries no label into the answer heads.
    bench/RESULTS.md, "The sentence verdicts aggregated over the answer", measures it.

    >>> from blackbox_wd.calibration.heads import Head, OperatingPoint, Platt, ScoreModel
    >>> h = Head(ScoreModel(("score", "unigram"), (1.0, 2.0), (2.0, 1.0), (0.5, 0.5), 0.0, Platt(-1.0, 0.0)),
    ...          OperatingPoint("target_fpr", 0.1, 0.5, 0.1, 0.5, 0.5, 0.5))
    >>> sentence_verdict(h, [{"score": 3.0, "unigram": 4.0}, {"score": 1.0, "unigram": None}])
    1.5
    """
    if head is None:
        return None
    rows = [[member_value(s, m) for m in head.members] for s in sentences or []]
    known = [r for r in rows if None not in r]
    return float(np.mean(head.model.decision(np.array(known, dtype=float)))) if known else None
