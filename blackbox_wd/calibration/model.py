"""A fitted calibration: a result's signals -> probability of hallucination -> flag.

A calibration holds one or more **heads**, each a model over its own members with its own threshold (``heads``), most
members first: a result is judged by the first head whose members it has (a result without a judged answer has no
AnswerWD, a target without log-probs no LNE; a calibration fitted on passages reads the members defined for short
answers only, ``SHORT_ONLY``, as missing on a passage), and says which members it used. A head may be of one **kind** of
answer (``KINDS``: a phrase, a sentence or a passage, ``answer_kind``), fitted on that kind's answers alone: a result is
judged by the heads of its kind first, then by those of every kind (the first head is one of those). A **sentence**
head, when present, gives each sentence of a judged answer its own p and flag from its OT score and its lexical surprise
(``SENTENCE_MEMBERS``), and the answer the member ``sentence_verdict``: the mean of its sentences' z under that head
(:func:`sentence_verdict`), which only a calibration with a sentence head can read. The calibration's file, plain JSON
in format 1 (the first files: one head over [AvgWD, ln EigenWD]) or 2, is ``fileformat``'s.

p holds for the base rate of the data the calibration was fitted on; :func:`shift_prior` moves it to a base rate the
user states, by Bayes' rule. The flag is set on the fitted p, so its false-positive rate, which a change of base rate
leaves alone, is the one the calibration was chosen for.

A calibration is valid for the settings that change a prompt's score except the seed (which changes which samples are
drawn, not their law): ``settings.fingerprint(reported, seed=False)`` over the run's reported settings. A run with
another fingerprint is refused, never scored with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from blackbox_wd.adaptive import START
from blackbox_wd.calibration import fileformat
from blackbox_wd.calibration.heads import FittedOn, Head, OperatingPoint, RoundHeads, ScoreModel, Verdict
from blackbox_wd.calibration.members import TEACHER_FREE, answer_kind, member_value, result_field, sentence_verdict
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import (
    MEANING,
    PER_K,
    RECORDED,
    SAMPLING,
    TEACHER_SIDE,
    calibration_fingerprint,
    covered_settings,
)

PACKAGE_CALIBRATIONS = Path(__file__).resolve().parent / "shipped"


@dataclass(frozen=True)
class Calibration:
    """A fitted calibration, valid for one settings fingerprint (seed excluded).

    Maps a result's members to a probability of hallucination and a flag (the module's docstring gives the model);
    made by :func:`blackbox_wd.calibration.fit.fit_calibration`, stored with :meth:`save` and read with :meth:`load`
    (``fileformat``: the JSON holds every number, so applying needs numpy only). A run whose settings mean something
    else is refused (:meth:`check`).

    Parameters
    ----------
    heads : tuple of Head
        Most members first, each a model (standardisation, logistic-regression coefficients, the calibrator) with its
        threshold and what it gave on the fitting data; the first judges every kind of answer.
    fingerprint : str
        16 hex digits: ``settings.fingerprint(reported, seed=False)`` of the covered settings.
    settings : dict of str to Any
        The covered settings (``COVERED``), readable; their fingerprint is ``fingerprint``.
    fitted_on : FittedOn
        The data it was fitted on (source, prompts per dataset, label, n, base rate, folds) and its
        cross-validated AUROC, log-loss, Brier score and ECE.
    bbwd_version : str
        The version of bbwd that fitted it.
    origin : str, default=""
        Where it was loaded from (a path, or "embedded NAME"); not stored, not compared.
    sentence, claim : Head or None
        Each sentence's p and flag from SENTENCE_MEMBERS; each claim's from CLAIM_MEMBERS.
    rounds : tuple of RoundHeads
        The heads at the other fitted K (``ks``), in order of k.
    short_only : tuple of str
        Of SHORT_ONLY: the members read as missing on a passage (``is_passage``).

    Examples
    --------
    >>> cal = Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.json")
    >>> v = cal.verdict({"avg_wd": 40.0, "eigen_wd": 3.0})
    >>> 0.0 <= v.p <= 1.0 and v.flag == (v.p_fitted >= v.threshold)
    True
    """

    heads: tuple[Head, ...]
    fingerprint: str
    settings: dict[str, Any]  # the covered settings, readable
    fitted_on: FittedOn
    bbwd_version: str
    origin: str = field(default="", compare=False)  # where it was loaded from; not stored
    sentence: Head | None = None
    claim: Head | None = None
    rounds: tuple[RoundHeads, ...] = ()
    short_only: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The calibration as a message names it: "calibration ORIGIN", else "the calibration"."""
        return f"calibration {self.origin}" if self.origin else "the calibration"

    @property
    def model(self) -> ScoreModel:
        """The first head's model."""
        return self.heads[0].model

    @property
    def operating_point(self) -> OperatingPoint:
        """The first head's threshold and what it gave."""
        return self.heads[0].operating_point

    @cached_property
    def is_teacher_free(self) -> bool:
        """True when every head (of every fitted K) reads members of the texts alone (``TEACHER_FREE``) and there is
        no sentence or claim head (they read the teacher's states): the calibration judges a run of any teacher.

        >>> Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.json").is_teacher_free
        False
        """
        every = (*self.heads, *(h for s in self.rounds for h in s.heads))
        return self.sentence is None and self.claim is None and all(_reads_texts_alone(h) for h in every)

    def teacher_free(self) -> Calibration | None:
        """The calibration restricted to its heads that read the texts alone (``TEACHER_FREE``), in their order, at
        every fitted K (a stage without such a head is left out); no sentence head and no claim head (they read
        the teacher's states). It judges a run of any teacher (``is_teacher_free``: ``check`` and ``mismatch`` leave
        the teacher's settings out). None when the calibration's own K has no such head.

        Returns
        -------
        Calibration or None
        """
        heads = tuple(h for h in self.heads if _reads_texts_alone(h))
        if not heads:
            return None
        rounds = tuple(
            replace(s, heads=kept) for s in self.rounds if (kept := tuple(h for h in s.heads if _reads_texts_alone(h)))
        )
        on = replace(self.fitted_on, sentence_base_rate=None, sentence_n=None, claim_base_rate=None, claim_n=None)
        return replace(self, heads=heads, sentence=None, claim=None, rounds=rounds, fitted_on=on)

    @property
    def k(self) -> int:
        """The calibration's own K: the sample count its first heads (``heads``) were fitted at."""
        return int(self.settings["k"])

    @property
    def ks(self) -> tuple[int, ...]:
        """Every sample count the calibration has heads for, increasing."""
        return tuple(sorted({self.k, *(s.k for s in self.rounds)}))

    def fitted_k(self, k: int) -> int:
        """The fitted K whose heads judge a result of ``k`` samples: ``k`` when fitted, else the nearest lower one;
        BBWDError when ``k`` is below every fitted K.

        >>> cal = Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.json")
        >>> cal.ks, cal.fitted_k(10), cal.fitted_k(7), cal.fitted_k(40)
        ((3, 5, 10), 10, 5, 10)
        """
        lower = [fitted for fitted in self.ks if fitted <= k]
        if not lower:
            raise BBWDError(
                f"{self.name} has heads for K = {', '.join(map(str, self.ks))}; this run's K = {k} is below them"
            )
        return lower[-1]

    def k_note(self, k: int) -> str | None:
        """None when the calibration has heads fitted at ``k`` samples, else a one-line note on which K's judge
        (BBWDError when ``k`` is below every fitted K)."""
        fitted = self.fitted_k(k)
        if fitted == k:
            return None
        return (
            f"note: {self.name} has heads for K = {', '.join(map(str, self.ks))}: K = {k} is judged by the heads of "
            f"K = {fitted}, the nearest lower"
        )

    def round_at(self, k: int | None) -> RoundHeads | None:
        """The stage whose heads judge a result of ``k`` samples (``fitted_k``); None for the calibration's own heads
        (``k`` None, or judged by K's)."""
        if k is None:
            return None
        fitted = self.fitted_k(k)
        return next((s for s in self.rounds if s.k == fitted), None)

    def settled(self, verdict: Verdict, k: int, k_max: int) -> bool:
        """True when a ``-k auto`` result of ``k`` samples (at most ``k_max``) with this verdict stops drawing: at
        ``k_max`` always; before it when the run's ``k_max`` is the calibration's K, the stage was fitted at ``k``
        and the fitted p is outside its band (``adaptive.Settle``); else it draws on (no band was fitted for it)."""
        if k >= k_max:
            return True
        stage = next((s for s in self.rounds if s.k == k), None)
        return k_max == self.k and stage is not None and stage.settle.settled(verdict.p_fitted)

    def head_for(self, result: Any, k: int | None = None) -> tuple[Head, np.ndarray]:
        """The first head (of the fitted K that judges ``k`` samples, ``fitted_k``; None: the calibration's own) of
        the result's kind of answer (``answer_kind``), else of every kind, whose members the result has, with their
        values; BBWDError naming what is missing."""
        stage = self.round_at(k)
        kind = answer_kind(result, k)
        every = self.heads if stage is None else stage.heads
        heads = tuple(h for h in every if h.kind == kind) + tuple(h for h in every if h.kind is None)
        skip = set(self.short_only) if self.short_only and kind == "passage" else set()
        known: dict[str, float | None] = {}  # each member read once, when a head asks for it

        def value(m: str) -> float | None:
            if m not in known:
                known[m] = None if m in skip else self.member(result, m)
            return known[m]

        for head in heads:
            if all(value(m) is not None for m in head.members):  # read up to the first one missing
                return head, np.array([known[m] for m in head.members], dtype=float)
        missing = [m for m in heads[-1].members if value(m) is None]
        why = "; the calibration reads " + ", ".join(sorted(skip)) + " as missing on a passage" if skip else ""
        raise BBWDError(f"cannot calibrate: no finite {', '.join(missing)} (eigen_wd must be > 0){why}")

    def member(self, result: Any, name: str) -> float | None:
        """The member ``name`` of a result as this calibration reads it: ``sentence_verdict`` from its sentences and
        the sentence head, any other by ``member_value``."""
        if name == "sentence_verdict":
            return sentence_verdict(self.sentence, result_field(result, "sentences"))
        return member_value(result, name)

    def verdict(self, result: Any, base_rate: float | None = None, k: int | None = None) -> Verdict:
        """The verdict of a ``Result`` or a row dict: p, flag and the members used.

        Parameters
        ----------
        result : Result or mapping
            Its members as attributes or keys (``member_value``).
        base_rate : float or None, default=None
            The share of hallucinations where the user scores, in (0, 1): p is moved to it from the fitting
            data's (``shift_prior``). The flag does not move: it compares the fitted p with the threshold,
            whose false-positive rate does not depend on the base rate.
        k : int or None, default=None
            The samples the result was scored on: the heads fitted at that K, else at the nearest lower one
            (``fitted_k``); None: the calibration's own heads (fitted at its K).

        Returns
        -------
        Verdict
        """
        head, x = self.head_for(result, k)
        return head.judge(x, self.fitted_on.base_rate, base_rate)

    def sentence_verdicts(self, sentences: Any, base_rate: float | None = None) -> list[Verdict | None]:
        """Each sentence's verdict from the sentence head (None for a sentence without its members, and for
        every sentence when the calibration has no sentence head)."""
        if self.sentence is None:
            return [None] * len(sentences)
        head, rate = self.sentence, self.fitted_on.sentence_base_rate
        return [head.judge_known([member_value(s, m) for m in head.members], rate, base_rate) for s in sentences]

    def claim_verdicts(self, claims: Any, result: Any, base_rate: float | None = None) -> list[Verdict | None]:
        """Each claim's verdict from the claim head, a member read from the claim, else from its ``result`` (the
        answer's AvgWD); None for a claim without its members, and for every claim without a claim head.

        Parameters
        ----------
        claims : sequence of ClaimScore or mapping
            The judged answer's scored claims (``claims.score_claims``, or a row's ``claims``).
        result : Result or mapping
            The result they belong to.
        base_rate : float or None, default=None
            The share of unsupported claims where the user scores: p is moved to it (``shift_prior``).

        Returns
        -------
        list of Verdict or None
            In the order of ``claims``.
        """
        if self.claim is None:
            return [None] * len(claims)
        head, rate = self.claim, self.fitted_on.claim_base_rate
        read = lambda c, m: member_value(result if m == "avg_wd" else c, m)  # noqa: E731
        return [head.judge_known([read(c, m) for m in head.members], rate, base_rate) for c in claims]

    @cached_property
    def id(self) -> str:
        """16 hex digits of sha256 over the JSON document: which calibration scored a batch row (computed once)."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def _differing(self, reported: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        """The run's value of each of ``names`` that differs from the calibration's."""
        run, own = covered_settings(reported), covered_settings(self.settings)
        return {name: run[name] for name in names if own[name] != run[name]}

    def _diffs(self, reported: Mapping[str, Any], names: tuple[str, ...]) -> list[str]:
        """'name: value in the calibration, value here' for each of ``names`` that differs."""
        return [
            f"{name}: {json.dumps(self.settings.get(name))} in the calibration, {json.dumps(value)} here"
            for name, value in self._differing(reported, names).items()
        ]

    def mismatch(self, reported: Mapping[str, Any]) -> str | None:
        """None when the run's settings mean what the calibration's meant (``MEANING``), else which differ (one
        line). Settings of the sampling side (``SAMPLING``) may differ: see :meth:`sampling_note`. The sample count
        and ``-k auto`` are not compared: the heads of the fitted K judge any K at or above it (``fitted_k``), and
        a stage's heads the same stage of ``-k auto``; nor, for a calibration whose heads read no teacher state
        (``is_teacher_free``), the teacher's settings (``TEACHER_SIDE``)."""
        ignored = PER_K + TEACHER_SIDE if self.is_teacher_free else PER_K
        reported = {**reported, **{name: self.settings.get(name) for name in ignored}}
        if calibration_fingerprint(reported) == self.fingerprint:
            return None
        diffs = self._diffs(reported, MEANING)
        if not diffs and self._differing(reported, SAMPLING):
            return None
        return (
            f"it is for settings {self.fingerprint}, this run has {calibration_fingerprint(reported)} "
            f"({'; '.join(diffs) or 'the same values, of other types'})"
        )

    def sampling_note(self, reported: Mapping[str, Any]) -> str | None:
        """None when the run samples as the calibration's data was sampled, else a one-line note naming what differs."""
        differing = self._differing(reported, SAMPLING)
        if not differing:
            return None
        data = ", ".join(f"{k} ({v})" for k, v in self.fitted_on.data.items())
        if self.settings.get("target") == RECORDED:  # no sampling settings to compare: say who drew the samples
            here = ", ".join(f"{k} {json.dumps(v)}" for k, v in differing.items())
            return (
                f"note: {self.name} was fitted on recorded samples ({self.fitted_on.samples or 'origin not stated'}; "
                f"{data}); this run: {here}: its risk is a probability on that data"
            )
        diffs = "; ".join(self._diffs(reported, SAMPLING))
        return (
            f"note: {self.name} was fitted on samples drawn otherwise ({data}; {diffs}): its risk is a probability "
            "on that data"
        )

    def check(self, reported: Mapping[str, Any]) -> None:
        """Raise BBWDError unless the run's settings are those calibrated and its K is at or above a fitted K."""
        why = self.mismatch(reported)
        if why is not None:
            raise BBWDError(f"{self.name} does not apply to this run: {why}")
        if isinstance(reported.get("k"), int):
            self.fitted_k(min(reported["k"], START) if reported.get("stop") else reported["k"])

    def summary(self, verdict: Verdict | None = None, base_rate: float | None = None) -> dict[str, Any]:
        """What a scored result says about the calibration it used (with its verdict: the head's members and
        threshold, and the base rate its p is at)."""
        point = self.operating_point if verdict is None else verdict.head.operating_point
        out = {
            "origin": self.origin,
            "id": self.id,
            "fingerprint": self.fingerprint,
            "threshold": point.threshold,
            "operating_point": dict(vars(point)),  # asdict's values: plain numbers and tuples, not copied
            "n": self.fitted_on.n,
            "label": self.fitted_on.label,
            "data": self.fitted_on.data,
        }
        if verdict is not None:
            out.update(
                members=list(verdict.members), base_rate={"fitted": self.fitted_on.base_rate, "stated": base_rate}
            )
        return out

    def to_json(self) -> str:
        """The calibration as a JSON document (``fileformat.dump``): format 1 when it has one head over FEATURES and
        nothing more, so that such a file keeps its bytes and its id."""
        return fileformat.dump({name: getattr(self, name) for name in fileformat.STORED})

    @classmethod
    def from_json(cls, text: str | bytes, origin: str = "") -> Calibration:
        """Parse and check a calibration written by ``to_json`` (format 1 or 2; ``fileformat.parse``)."""
        return cls(**fileformat.parse(text, origin or "calibration"), origin=origin)

    def save(self, path: str | Path) -> None:
        """Write ``to_json()`` to ``path``."""
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """Read a calibration file; BBWDError naming the file when it is missing or not one."""
        path = Path(path)
        if not path.is_file():
            raise BBWDError(f"calibration file not found: {path}")
        return cls.from_json(path.read_bytes(), origin=str(path))


def _reads_texts_alone(head: Head) -> bool:
    """True when every member of ``head`` is read from the texts alone (``TEACHER_FREE``)."""
    return set(head.members) <= set(TEACHER_FREE)
