"""A fitted calibration: a result's signals -> probability of hallucination -> flag, stored as plain JSON.

The applied model (fitted by ``calibration.fit``) is

    z = sum_j coef_j * (x_j - mean_j) / scale_j + intercept      x = the head's members (``MEMBERS``)
    p = calibrator(z)
    flag = p >= threshold

with z the combined score (scikit-learn's ``StandardScaler`` then ``LogisticRegression``'s
``decision_function``) and the calibrator either isotonic (``IsotonicRegression(out_of_bounds=
"clip")``: linear interpolation between the stored points, constant beyond them) or Platt
(``p = 1 / (1 + exp(a z + b))``, the sign scikit-learn's sigmoid calibration stores). The JSON holds
every number needed to compute p, so applying a calibration needs numpy only.

A calibration holds one or more **heads**, each such a model over its own members with its own threshold, most members
first: a result is judged by the first head whose members it has (a result without a judged answer has no AnswerWD, a
target without log-probs no LNE; a calibration fitted on passages reads the members defined for short answers only,
``SHORT_ONLY``, as missing on a passage), and says which members it used. A head may be of one **kind** of answer
(``KINDS``: a phrase, a sentence or a passage, ``answer_kind``), fitted on that kind's answers alone: a result is
judged by the heads of its kind first, then by those of every kind (the first head is one of those). The first
calibrations (format 1) hold one head over [AvgWD, ln EigenWD]; they still load and apply. A **sentence** head, when
present, gives each sentence of a judged answer its own p and flag from its OT score and its lexical surprise
(``SENTENCE_MEMBERS``), and the answer the member ``sentence_verdict``: the mean of its sentences' z under that head
(:func:`sentence_verdict`), which only a calibration with a sentence head can read.

p holds for the base rate of the data the calibration was fitted on; :func:`shift_prior` moves it to a base
rate the user states, by Bayes' rule. The flag is set on the fitted p, so its false-positive rate, which
a change of base rate leaves alone, is the one the calibration was chosen for.

A calibration is valid for the settings that change a prompt's score except the seed (which
changes which samples are drawn, not their law): ``settings.fingerprint(reported, seed=False)``
over the run's reported settings. A run with another fingerprint is refused, never scored with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from blackbox_wd.adaptive import START, Settle
from blackbox_wd.calibration.heads import Head, Isotonic, OperatingPoint, ScoreModel, Verdict
from blackbox_wd.calibration.members import (
    CLAIM_MEMBERS,
    FEATURES,
    KINDS,
    MEMBERS,
    SENTENCE_MEMBERS,
    SHORT_ONLY,
    TEACHER_FREE,
    answer_kind,
    member_value,
    result_field,
    sentence_verdict,
)
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

FORMAT_1 = "bbwd-calibration/1"  # one head over FEATURES; still read, and written for such a calibration
FORMAT = "bbwd-calibration/2"  # heads over any MEMBERS, and a sentence head
PACKAGE_CALIBRATIONS = Path(__file__).resolve().parent / "shipped"


@dataclass(frozen=True)
class Stage:
    """The heads of another sample count than the calibration's own K: fitted on the first ``k`` samples of the
    calibration's data; they judge runs of ``k`` samples (and of every K up to the next fitted one), and stage ``k``
    of ``-k auto``. ``settle``, for a stage below the calibration's K: its band (``adaptive.Settle``) for ``-k auto``
    up to that K: a prompt whose p at this stage is outside it stops here (a stage above K: never, ``Settle()``)."""

    k: int
    heads: tuple[Head, ...]
    settle: Settle

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> Stage:
        """The stage from its ``asdict`` form; KeyError/TypeError when malformed."""
        return cls(int(body["k"]), tuple(Head.from_dict(h) for h in body["heads"]), Settle(**body["settle"]))


@dataclass(frozen=True)
class FittedOn:
    """Where a calibration was fitted and how it did there (cross-validated)."""

    source: str  # the labelled results file
    data: dict[str, int]  # prompts per dataset (the rows' ``source``)
    protocol: str | None
    label: str
    n: int
    positives: int
    base_rate: float
    folds: int
    seed: int
    cv: dict[str, float]  # auroc (combined score), log_loss, brier, ece of the applied model
    samples: str | None = None  # who drew the rows' samples (bbwd calibrate --samples); stored only when given
    sentence_base_rate: float | None = None  # with a sentence head: the share of hallucinated sentences it saw
    sentence_n: int | None = None  # with a sentence head: the sentences it was fitted on
    claim_base_rate: float | None = None  # with a claim head: the share of unsupported claims it saw
    claim_n: int | None = None  # with a claim head: the claims it was fitted on (``other`` left out)
    refit: str | None = None  # a map refitted on a user's labels (``recalibrate``): which, of which calibration


@dataclass(frozen=True)
class Calibration:
    """A fitted calibration, valid for one settings fingerprint (seed excluded).

    Maps a result's AvgWD and EigenWD to a probability of hallucination and a flag (the module's
    docstring gives the model); made by :func:`blackbox_wd.calibration.fit.fit_calibration`, stored
    with :meth:`save` and read with :meth:`load` (the JSON holds every number, so applying needs numpy
    only). A run whose settings mean something else is refused (:meth:`check`).

    Parameters
    ----------
    model : ScoreModel
        Standardisation, logistic-regression coefficients and the calibrator (isotonic or Platt) of the
        features [AvgWD, ln EigenWD].
    operating_point : OperatingPoint
        The threshold on p and its cross-validated FPR, TPR, precision and F1 on the fitting data.
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

    Examples
    --------
    >>> cal = Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.json")
    >>> v = cal.verdict({"avg_wd": 40.0, "eigen_wd": 3.0})
    >>> 0.0 <= v.p <= 1.0 and v.flag == (v.p_fitted >= v.threshold)
    True
    """

    model: ScoreModel
    operating_point: OperatingPoint
    fingerprint: str
    settings: dict[str, Any]  # the covered settings, readable
    fitted_on: FittedOn
    bbwd_version: str
    origin: str = field(default="", compare=False)  # where it was loaded from; not stored
    more_heads: tuple[Head, ...] = ()  # after the first (``model``, ``operating_point``), fewer members each
    sentence: Head | None = None  # each sentence's p and flag from SENTENCE_MEMBERS
    claim: Head | None = None  # each claim's p and flag from CLAIM_MEMBERS
    stages: tuple[Stage, ...] = ()  # the heads at the other fitted K (``ks``), in order of k
    short_only: tuple[str, ...] = ()  # of SHORT_ONLY: members read as missing on a passage (``is_passage``)

    @property
    def heads(self) -> tuple[Head, ...]:
        """Every head, most members first: the first (``model``, ``operating_point``), then ``more_heads``."""
        return (Head(self.model, self.operating_point), *self.more_heads)

    def with_heads(self, heads: tuple[Head, ...], **changes: Any) -> Calibration:
        """The calibration with ``heads`` (most members first) as its own, and the fields ``changes``."""
        return replace(
            self, model=heads[0].model, operating_point=heads[0].operating_point, more_heads=heads[1:], **changes
        )

    @cached_property
    def is_teacher_free(self) -> bool:
        """True when every head (of every fitted K) reads members of the texts alone (``TEACHER_FREE``) and there is
        no sentence or claim head (they read the teacher's states): the calibration judges a run of any teacher.

        >>> Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.json").is_teacher_free
        False
        """
        every = (*self.heads, *(h for s in self.stages for h in s.heads))
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
        stages = tuple(
            replace(s, heads=kept) for s in self.stages if (kept := tuple(h for h in s.heads if _reads_texts_alone(h)))
        )
        fitted_on = replace(
            self.fitted_on, sentence_base_rate=None, sentence_n=None, claim_base_rate=None, claim_n=None
        )
        return self.with_heads(heads, sentence=None, claim=None, stages=stages, fitted_on=fitted_on)

    @property
    def k(self) -> int:
        """The calibration's own K: the sample count its first heads (``heads``) were fitted at."""
        return int(self.settings["k"])

    @property
    def ks(self) -> tuple[int, ...]:
        """Every sample count the calibration has heads for, increasing."""
        return tuple(sorted({self.k, *(s.k for s in self.stages)}))

    def fitted_k(self, k: int) -> int:
        """The fitted K whose heads judge a result of ``k`` samples: ``k`` when fitted, else the nearest lower one;
        BBWDError when ``k`` is below every fitted K.

        >>> cal = Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.json")
        >>> cal.ks, cal.fitted_k(10), cal.fitted_k(7), cal.fitted_k(40)
        ((3, 5, 10), 10, 5, 10)
        """
        lower = [fitted for fitted in self.ks if fitted <= k]
        if not lower:
            name = f"calibration {self.origin}" if self.origin else "the calibration"
            raise BBWDError(
                f"{name} has heads for K = {', '.join(map(str, self.ks))}; this run's K = {k} is below them"
            )
        return lower[-1]

    def k_note(self, k: int) -> str | None:
        """None when the calibration has heads fitted at ``k`` samples, else a one-line note on which K's judge
        (BBWDError when ``k`` is below every fitted K)."""
        fitted = self.fitted_k(k)
        if fitted == k:
            return None
        name = f"calibration {self.origin}" if self.origin else "the calibration"
        return (
            f"note: {name} has heads for K = {', '.join(map(str, self.ks))}: K = {k} is judged by the heads of "
            f"K = {fitted}, the nearest lower"
        )

    def stage(self, k: int | None) -> Stage | None:
        """The stage whose heads judge a result of ``k`` samples (``fitted_k``); None for the calibration's own heads
        (``k`` None, or judged by K's)."""
        if k is None:
            return None
        fitted = self.fitted_k(k)
        return next((s for s in self.stages if s.k == fitted), None)

    def settled(self, verdict: Verdict, k: int, k_max: int) -> bool:
        """True when a ``-k auto`` result of ``k`` samples (at most ``k_max``) with this verdict stops drawing: at
        ``k_max`` always; before it when the run's ``k_max`` is the calibration's K, the stage was fitted at ``k``
        and the fitted p is outside its band (``adaptive.Settle``); else it draws on (no band was fitted for it)."""
        if k >= k_max:
            return True
        stage = next((s for s in self.stages if s.k == k), None)
        return k_max == self.k and stage is not None and stage.settle.settled(verdict.p_fitted)

    def head_for(self, result: Any, k: int | None = None) -> tuple[Head, np.ndarray]:
        """The first head (of the fitted K that judges ``k`` samples, ``fitted_k``; None: the calibration's own) of
        the result's kind of answer (``answer_kind``), else of every kind, whose members the result has, with their
        values; BBWDError naming what is missing."""
        stage = self.stage(k)
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
        out: list[Verdict | None] = []
        for sentence in sentences:
            values = [member_value(sentence, m) for m in head.members]
            known = all(v is not None for v in values)
            out.append(head.judge(np.array(values, dtype=float), rate, base_rate) if known else None)
        return out

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
        out: list[Verdict | None] = []
        for claim in claims:
            values = [member_value(claim, m) if m != "avg_wd" else member_value(result, m) for m in head.members]
            known = all(v is not None for v in values)
            out.append(head.judge(np.array(values, dtype=float), rate, base_rate) if known else None)
        return out

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
        name = f"calibration {self.origin}" if self.origin else "the calibration"
        data = ", ".join(f"{k} ({v})" for k, v in self.fitted_on.data.items())
        if self.settings.get("target") == RECORDED:  # no sampling settings to compare: say who drew the samples
            here = ", ".join(f"{k} {json.dumps(v)}" for k, v in differing.items())
            return (
                f"note: {name} was fitted on recorded samples ({self.fitted_on.samples or 'origin not stated'}; "
                f"{data}); this run: {here}: its risk is a probability on that data"
            )
        diffs = "; ".join(self._diffs(reported, SAMPLING))
        return (
            f"note: {name} was fitted on samples drawn otherwise ({data}; {diffs}): its risk is a probability "
            "on that data"
        )

    def check(self, reported: Mapping[str, Any]) -> None:
        """Raise BBWDError unless the run's settings are those calibrated and its K is at or above a fitted K."""
        why = self.mismatch(reported)
        if why is not None:
            name = f"calibration {self.origin}" if self.origin else "the calibration"
            raise BBWDError(f"{name} does not apply to this run: {why}")
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
        """The calibration as a JSON document (plain numbers and strings; no NaN); format 1 when it has one head
        over FEATURES and no sentence head, so that such a file keeps its bytes and its id."""
        body: dict[str, Any] = {"format": FORMAT, **asdict(self)}
        del body["origin"], body["more_heads"], body["sentence"], body["claim"], body["stages"], body["short_only"]
        # files without them keep their bytes, and id
        for name in ("samples", "sentence_base_rate", "sentence_n", "claim_base_rate", "claim_n", "refit"):
            if body["fitted_on"][name] is None:
                del body["fitted_on"][name]
        if (
            self.more_heads
            or self.sentence is not None
            or self.claim is not None
            or self.stages
            or self.short_only
            or self.model.features != FEATURES
        ):
            body["more_heads"] = [asdict(h) for h in self.more_heads]
            body["sentence"] = None if self.sentence is None else asdict(self.sentence)
            if self.claim is not None:  # files without a claim head keep their bytes, and id
                body["claim"] = asdict(self.claim)
            if self.stages:
                body["stages"] = [asdict(s) for s in self.stages]
            if self.short_only:
                body["short_only"] = list(self.short_only)
        else:
            body["format"] = FORMAT_1
        return json.dumps(_without_ranges(body), indent=1, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, origin: str = "") -> Calibration:
        """Parse and check a calibration written by ``to_json`` (format 1 or 2)."""
        where = origin or "calibration"
        try:
            body = json.loads(text, parse_constant=_no_constant)  # bytes: UTF-8 or a ValueError
        except ValueError as exc:
            raise BBWDError(f"{where} is not a calibration file: {exc}") from None
        if not isinstance(body, dict) or body.get("format") not in (FORMAT_1, FORMAT):
            raise BBWDError(f"{where} is not a calibration file (field 'format' is not {FORMAT!r} or {FORMAT_1!r})")
        try:
            sentence, claim = body.get("sentence"), body.get("claim")
            cal = cls(
                model=ScoreModel.from_dict(body["model"]),
                operating_point=OperatingPoint(**body["operating_point"]),
                fingerprint=body["fingerprint"],
                settings=body["settings"],
                fitted_on=FittedOn(**body["fitted_on"]),
                bbwd_version=body["bbwd_version"],
                origin=origin,
                more_heads=tuple(Head.from_dict(h) for h in body.get("more_heads", [])),
                sentence=None if sentence is None else Head.from_dict(sentence),
                claim=None if claim is None else Head.from_dict(claim),
                stages=tuple(Stage.from_dict(s) for s in body.get("stages", [])),
                short_only=tuple(body.get("short_only", [])),
            )
        except (KeyError, TypeError) as exc:
            raise BBWDError(f"{where}: missing or unexpected field: {exc}") from None
        _check(cal, where)
        return cal

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


LATER_POINT_FIELDS = ("fpr_range", "tpr_range", "fpr_interval", "negatives", "kind")  # of a head, added later


def _without_ranges(body: Any) -> Any:
    """The JSON body without the operating points' fields added later (``LATER_POINT_FIELDS``) that are None, so
    that a file fitted before they were stored keeps its bytes and its id."""
    if isinstance(body, dict):
        return {k: _without_ranges(v) for k, v in body.items() if not (k in LATER_POINT_FIELDS and v is None)}
    if isinstance(body, (list, tuple)):
        return [_without_ranges(v) for v in body]
    return body


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number in plain JSON")


def _check(cal: Calibration, where: str) -> None:
    """Raise BBWDError naming the first field of a calibration that cannot be right."""
    rules: list[tuple[str, bool, str]] = []
    named: list[tuple[str, Head, tuple[str, ...]]] = [("model", Head(cal.model, cal.operating_point), MEMBERS)]
    named += [(f"more_heads[{n}]", h, MEMBERS) for n, h in enumerate(cal.more_heads)]
    named += [("sentence", cal.sentence, SENTENCE_MEMBERS)] if cal.sentence is not None else []
    named += [("claim", cal.claim, CLAIM_MEMBERS)] if cal.claim is not None else []
    named += [(f"stages[{n}].heads[{m}]", h, MEMBERS) for n, s in enumerate(cal.stages) for m, h in enumerate(s.heads)]
    rules += [
        (
            f"stages[{n}]",
            bool(s.heads) and 2 <= s.k != cal.settings.get("k") and 0 <= s.settle.below <= s.settle.above <= 1,
            "heads, 2 <= k and not the calibration's k, 0 <= below <= above <= 1",
        )
        for n, s in enumerate(cal.stages)
    ]
    rules.append(("stages", len({s.k for s in cal.stages}) == len(cal.stages), "one entry per k"))
    for where_, head, allowed in named:
        m = head.model
        n = len(m.features)
        unknown = [f for f in m.features if f not in allowed]
        rules += [
            (f"{where_}.features", n >= 1 and not unknown, f"members of {list(allowed)} (unknown: {unknown})"),
            (f"{where_}.mean/scale/coef", len(m.mean) == len(m.scale) == len(m.coef) == n, f"{n} numbers each"),
            (f"{where_}.scale", all(s > 0 for s in m.scale), "positive"),
            (
                f"{where_}.calibrator",
                not isinstance(m.calibrator, Isotonic)
                or (
                    len(m.calibrator.x) == len(m.calibrator.y) >= 1
                    and list(m.calibrator.x) == sorted(m.calibrator.x)
                    and all(0 <= v <= 1 for v in m.calibrator.y)
                ),
                "isotonic points with x increasing and y in [0, 1]",
            ),
            (f"{where_}.operating_point.threshold", 0 <= head.operating_point.threshold <= 1, "in [0, 1]"),
            (f"{where_}.kind", head.kind is None or head.kind in KINDS, f"one of {list(KINDS)} or absent"),
        ]
    rules += [
        ("short_only", set(cal.short_only) <= set(SHORT_ONLY), f"members of {list(SHORT_ONLY)}"),
        (
            "sentence",
            cal.sentence is not None or all("sentence_verdict" not in h.members for _, h, _ in named),
            "a head when another head reads sentence_verdict",
        ),
        ("fitted_on.base_rate", 0 < cal.fitted_on.base_rate < 1, "in (0, 1)"),
        (
            "fitted_on.sentence_base_rate",
            cal.sentence is None
            or (cal.fitted_on.sentence_base_rate is not None and 0 < cal.fitted_on.sentence_base_rate < 1),
            "in (0, 1) with a sentence head",
        ),
        (
            "fitted_on.claim_base_rate",
            cal.claim is None or (cal.fitted_on.claim_base_rate is not None and 0 < cal.fitted_on.claim_base_rate < 1),
            "in (0, 1) with a claim head",
        ),
        (
            "fingerprint",
            cal.fingerprint == calibration_fingerprint(cal.settings),
            "the fingerprint of its settings (the file was edited?)",
        ),
    ]
    for name, ok, want in rules:
        if not ok:
            raise BBWDError(f"{where}: field '{name}' must be {want}")
