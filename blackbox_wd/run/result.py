"""A prompt's result and its one serialization: :class:`Result`, and :func:`result_row` of a door's :class:`RowFields`.

Every door writes a result through :func:`result_row`: ``score --json`` (:meth:`Result.to_dict`), ``batch``'s rows,
``eval``'s rows, the server's ``bbwd`` object and each ``-k auto`` round's entry (``rounds.round_entry``). A door
names its fields once (a :class:`RowFields`: which fields, in which order, which are left out without a value,
which are spread into the row) and adds only its own keys (ids, labels, errors) around the row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from blackbox_wd.measure.sentences import SentenceScore, sentence_dicts
from blackbox_wd.records import JSONObject, Messages, Usage
from blackbox_wd.signals.claims import ClaimScore, claim_dicts


@dataclass(frozen=True)
class Round:
    """One round of ``-k auto`` a result was looked at: its sample count, its verdict, whether the loop stopped
    there, and its scores (those a calibration reads: ``calibration.members.member_value`` of them gives each
    member). A row writes it as ``to_dict`` under ``stages``."""

    k: int
    p_hallucination: float | None
    flag: bool | None
    settled: bool
    scores: JSONObject

    def to_dict(self) -> JSONObject:
        """``{"k", "p_hallucination", "flag", "settled", "scores"}``, JSON-ready."""
        return {
            "k": self.k,
            "p_hallucination": self.p_hallucination,
            "flag": self.flag,
            "settled": self.settled,
            "scores": self.scores,
        }


@dataclass
class Result:
    """Scores of one prompt with the responses, D and the exact settings that produced them."""

    prompt: Messages
    responses: list[str]
    token_counts: list[int]
    D: np.ndarray | None  # None: judged from the texts alone, not forced (``texts``), as the scores below
    avg_wd: float | None
    eigen_wd: float | None
    settings: JSONObject  # the settings as run (``Detector.reported_settings``), with their fingerprint
    eigen_wd_fixed: float | None = None  # EigenWD with the teacher's reference bandwidth (when it has one)
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    baselines: dict[str, float] = field(default_factory=dict)
    lne_source: str | None = None  # "target" (its own token log-probs: an API's, llama.cpp's) or "teacher" (forced)
    p_hallucination: float | None = None  # with a calibration: its probability of hallucination
    flag: bool | None = None  # with a calibration: p_hallucination >= its threshold
    calibration: dict[str, Any] | None = None  # with a calibration: its ``summary()``
    answer_wd: float | None = None  # with a judged answer: AnswerWD, its mean W2 to the K samples
    answer_error: str | None = None  # why a judged answer given has no AnswerWD (e.g. over the context)
    sentences: list[SentenceScore] | None = None  # with a judged answer: its sentences, each scored (``sentences``)
    sentence_wd: float | None = None  # with a judged answer: the mean of its sentences' scores that are not None
    claims: list[ClaimScore] | None = None  # with claims given: each scored (``claims.score_claims``)
    answer_unigram: float | None = None  # with a judged answer: the mean of its sentences' lexical surprises
    answer_disagreement: float | None = None  # with a judged answer: the share of samples not giving it
    answer_nll: float | None = None  # with a judged answer and the teacher's log-probs: its mean -log p of its tokens
    cocoa: float | None = None  # with answer_nll: answer_nll x answer_wd, confidence times consistency
    settled: bool | None = None  # -k auto, with a calibration: the verdict at these samples stops drawing
    rounds: list[Round] | None = None  # -k auto: each round looked at (``rounds.round_entry``), written as ``stages``

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (``result_row`` of EVERY_FIELD)."""
        return result_row(self, EVERY_FIELD)

    @property
    def target_tokens(self) -> int:
        """Tokens the target generated for the samples scored: the API's completion tokens (fresh and from the
        cache) when it was called, else the samples' tokens by the teacher's tokenizer (a local target's own)."""
        u = self.usage
        if u.requests or u.cache_hits:
            return u.completion_tokens + u.cached_completion_tokens
        return int(sum(self.token_counts))


def number(value: float | None) -> float | None:
    """A score as a plain float (None stays None)."""
    return None if value is None else float(value)


# Each field a door may write: its value for a result, and for a record that has no result.
ROW_FIELDS: dict[str, tuple[Callable[[Result], Any], Any]] = {
    "prompt": (lambda r: r.prompt, None),
    "responses": (lambda r: r.responses, []),
    "token_counts": (lambda r: r.token_counts, []),
    "n_samples": (lambda r: len(r.responses), 0),
    "k": (lambda r: len(r.responses), 0),  # n_samples, as the server's object and a round's entry name it
    "target_tokens": (lambda r: r.target_tokens, 0),
    "D": (lambda r: None if r.D is None else r.D.tolist(), None),
    "avg_wd": (lambda r: number(r.avg_wd), None),
    "eigen_wd": (lambda r: number(r.eigen_wd), None),
    "eigen_wd_fixed": (lambda r: number(r.eigen_wd_fixed), None),
    "answer_wd": (lambda r: number(r.answer_wd), None),
    "answer_error": (lambda r: r.answer_error, None),
    "sentences": (lambda r: sentence_dicts(r.sentences), None),
    "sentence_wd": (lambda r: number(r.sentence_wd), None),
    "claims": (lambda r: claim_dicts(r.claims), None),
    "answer_unigram": (lambda r: number(r.answer_unigram), None),
    "answer_disagreement": (lambda r: number(r.answer_disagreement), None),
    "answer_nll": (lambda r: number(r.answer_nll), None),
    "cocoa": (lambda r: number(r.cocoa), None),
    "baselines": (lambda r: dict(r.baselines), {}),
    "lne_source": (lambda r: r.lne_source, None),
    "p_hallucination": (lambda r: r.p_hallucination, None),
    "flag": (lambda r: r.flag, None),
    "settled": (lambda r: r.settled, None),
    "stages": (lambda r: None if r.rounds is None else [x.to_dict() for x in r.rounds], None),  # -k auto's rounds
    "members": (lambda r: (r.calibration or {}).get("members"), None),
    "calibration": (lambda r: r.calibration, None),
    "settings": (lambda r: r.settings, None),
    "fingerprint": (lambda r: r.settings.get("fingerprint"), None),
    "usage": (lambda r: asdict(r.usage), None),
    "timings": (lambda r: r.timings, {}),
}


@dataclass(frozen=True)
class RowFields:
    """A door's selection of a result's fields (keys of ROW_FIELDS).

    Parameters
    ----------
    names : tuple of str
        The fields, in the order the row lists them.
    optional : frozenset of str
        Fields left out of the row when they have no value (None, or an empty object); the others are always
        written (None or empty for a record without a result).
    spread : frozenset of str
        Fields whose object's items go into the row in the field's place, instead of the object (eval's
        baseline columns, a round's scores).
    """

    names: tuple[str, ...]
    optional: frozenset[str] = frozenset()
    spread: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = [name for name in (*self.names, *self.optional, *self.spread) if name not in ROW_FIELDS]
        assert not unknown, f"not fields of a result row: {unknown}"


# the run's scores of the samples, and of the judged answer against them: in this order in every door's row
SAMPLE_SCORES = ("avg_wd", "eigen_wd", "eigen_wd_fixed", "answer_wd")
ANSWER_SCORES = ("sentence_wd", "answer_unigram", "answer_disagreement", "answer_nll", "cocoa")
SERIALIZED = {"rounds": "stages"}  # a field of Result written under another name
EVERY_FIELD = RowFields(  # ``Result.to_dict``
    (*(SERIALIZED.get(f.name, f.name) for f in fields(Result)), "n_samples", "target_tokens")
)


def result_row(result: Result | None, selection: RowFields) -> dict[str, Any]:
    """The JSON-ready values of a door's fields for a result; for None (a record that failed or did not parse)
    each field's empty value.

    Parameters
    ----------
    result : Result or None
    selection : RowFields
        The door's fields.

    Returns
    -------
    dict
        ``{name: value}`` in the order of the names (a spread field's items in its place), without the optional
        fields that have no value.
    """
    row: dict[str, Any] = {}
    for name in selection.names:
        get, empty = ROW_FIELDS[name]
        value = empty if result is None else get(result)
        if name in selection.optional and (value is None or value == {}):
            continue
        if name in selection.spread:
            row.update(value)
        else:
            row[name] = value
    return row
