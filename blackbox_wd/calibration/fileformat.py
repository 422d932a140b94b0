"""A calibration's file: plain JSON in format 1 or 2, read into a calibration's fields and written from them.

Both formats hold the first head at the top level (``model``, ``operating_point``, the head over every kind of answer
that judges first) with the calibration's ``fingerprint``, ``settings``, ``fitted_on`` and ``bbwd_version``. Format 2
(``FORMAT``) adds the other heads (``more_heads``, most members first), the sentence head (``sentence``, null when
none), and when there are any the claim head (``claim``), the heads of the other sample counts (``stages``) and the
members read as missing on a passage (``short_only``). Format 1 (``FORMAT_1``), the first files, holds one head over
[AvgWD, ln EigenWD] and nothing more; a calibration of that shape is still written in it. The fields added later
(``LATER``) are left out when None. Both rules keep an older file's bytes, and its id (``Calibration.id``).

Every field of the file is declared once, in the tables below (``FILE`` and the tables it names): its name, its type
(``Kind``), what its value must be beyond its type (``Field.check`` and ``Field.want``), its value when absent and
the first format that holds it. Reading checks them in the order declared and refuses the first that fails, in one
line naming the field and the file. An object's other fields are refused, but for the file's top level's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any, Final

from blackbox_wd.adaptive import Settle
from blackbox_wd.calibration.heads import (
    CALIBRATORS,
    FittedOn,
    Head,
    Isotonic,
    OperatingPoint,
    Platt,
    RoundHeads,
    ScoreModel,
)
from blackbox_wd.calibration.members import CLAIM_MEMBERS, FEATURES, KINDS, MEMBERS, SENTENCE_MEMBERS, SHORT_ONLY
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import calibration_fingerprint

FORMAT_1: Final = "bbwd-calibration/1"  # one head over FEATURES; still read, and written for such a calibration
FORMAT: Final = "bbwd-calibration/2"  # heads over any MEMBERS, a sentence head, a claim head, stages
FORMATS: Final = (FORMAT_1, FORMAT)  # oldest first
# fields added after the first files of their format, left out when None so that such a file keeps its bytes
LATER: Final = (
    *("fpr_range", "tpr_range", "fpr_interval", "negatives", "kind"),  # of a head
    *("samples", "sentence_base_rate", "sentence_n", "claim_base_rate", "claim_n", "refit"),  # of fitted_on
)
REQUIRED: Final = object()  # ``Field.default`` of a field that must be present

Kind = Callable[[Any, str, dict[str, Any]], Any]  # (JSON value, its field's path, the file's fields read so far)
Check = Callable[[Any, dict[str, Any], dict[str, Any]], bool]  # (value, its object's fields so far, the file's)


class Refused(Exception):
    """A field whose value cannot be right: its path (``model.scale``) and what it must be."""

    def __init__(self, path: str, want: str) -> None:
        super().__init__(f"field '{path}' must be {want}")


@dataclass(frozen=True)
class Field:
    """A field of a calibration file: its name, its type (a ``Kind``: the value from its JSON, else ``Refused``), what
    its value must be (``check``, worded by ``want``: a text, or a function of the value), its value when absent
    (``REQUIRED``: it must be present) and the first format that holds it."""

    name: str
    kind: Kind
    want: str | Callable[[Any], str] = ""
    check: Check | None = None
    default: Any = REQUIRED
    since: str = FORMAT_1


def read_fields(body: Mapping[str, Any], fields: tuple[Field, ...], path: str, top: dict[str, Any]) -> dict[str, Any]:
    """The values of ``fields`` in a JSON object, each read by its kind and checked, in order.

    Parameters
    ----------
    body : mapping
        The JSON object.
    fields : tuple of Field
        Its declared fields.
    path : str
        Its path in the file ("" for the top level: its values are then added to ``top`` as they are read).
    top : dict
        The file's top-level fields read so far (a check may read them), with its ``format``.

    Returns
    -------
    dict of str to Any
        Each field's value (its default when absent).
    """
    here: dict[str, Any] = top if not path else {}
    for f in fields:
        where = f"{path}.{f.name}" if path else f.name
        if f.name not in body and f.default is REQUIRED:
            raise Refused(where, "present")
        if f.name in body and FORMATS.index(top["format"]) < FORMATS.index(f.since):
            raise Refused(where, f"absent in format {top['format']!r}")
        value = f.kind(body[f.name], where, top) if f.name in body else f.default  # a default is checked as a value
        if f.check is not None and not f.check(value, here, top):
            raise Refused(where, f.want(value) if callable(f.want) else f.want)
        here[f.name] = value
    return here


def _of_type(name: str, test: Callable[[Any], bool]) -> Kind:
    """A kind that keeps a JSON value as it is (a number keeps its int or float, and so its bytes) when ``test``."""

    def kind(value: Any, path: str, top: dict[str, Any]) -> Any:
        if not test(value):
            raise Refused(path, name)
        return value

    return kind


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


NUMBER = _of_type("a number", _is_number)
INTEGER = _of_type("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
TEXT = _of_type("a string", lambda v: isinstance(v, str))
ANY_JSON = _of_type("a JSON value", lambda v: True)  # any value JSON holds (``parse`` refuses NaN and infinities)
OBJECT = _of_type("an object", lambda v: isinstance(v, dict))
COUNTS = _of_type("an object of counts", lambda v: isinstance(v, dict) and all(isinstance(n, int) for n in v.values()))
SCORES = _of_type("an object of numbers", lambda v: isinstance(v, dict) and all(map(_is_number, v.values())))
NUMBERS = _of_type("a list of numbers", lambda v: isinstance(v, list) and all(map(_is_number, v)))
STRINGS = _of_type("a list of strings", lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v))
PAIR = _of_type("two numbers", lambda v: isinstance(v, list) and len(v) == 2 and all(map(_is_number, v)))


def tuple_of(kind: Kind) -> Kind:
    """A kind of list (``NUMBERS``, ``STRINGS``, ``PAIR``), read as a tuple."""
    return lambda value, path, top: tuple(kind(value, path, top))


def list_of(kind: Kind) -> Kind:
    """A JSON list of values of ``kind``, read as a tuple."""

    def read(value: Any, path: str, top: dict[str, Any]) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise Refused(path, "a list")
        return tuple(kind(v, f"{path}[{i}]", top) for i, v in enumerate(value))

    return read


def or_null(kind: Kind) -> Kind:
    """A value of ``kind``, or null (None)."""
    return lambda value, path, top: None if value is None else kind(value, path, top)


def record(fields: tuple[Field, ...], make: Callable[..., Any]) -> Kind:
    """A JSON object of ``fields`` (no other), read as ``make(**values)``."""

    def read(value: Any, path: str, top: dict[str, Any]) -> Any:
        if not isinstance(value, dict):
            raise Refused(path, "an object")
        other = sorted(set(value) - {f.name for f in fields})
        if other:
            raise Refused(f"{path}.{other[0]}", f"absent: {path} has the fields {', '.join(f.name for f in fields)}")
        return make(**read_fields(value, fields, path, top))

    return read


def _method(name: str) -> Field:
    return Field("method", TEXT, f"{name!r}", lambda v, *_: v == name)


ISOTONIC = (
    Field("x", tuple_of(NUMBERS), "increasing numbers", lambda v, *_: len(v) >= 1 and list(v) == sorted(v)),
    Field(
        "y",
        tuple_of(NUMBERS),
        "numbers in [0, 1], one per x",
        lambda v, o, _: len(v) == len(o["x"]) and all(0 <= p <= 1 for p in v),
    ),
    _method("isotonic"),
)
PLATT = (Field("a", NUMBER), Field("b", NUMBER), _method("platt"))


def calibrator(value: Any, path: str, top: dict[str, Any]) -> Isotonic | Platt:
    """The calibrator its ``method`` names (``CALIBRATORS``)."""
    if not isinstance(value, dict):
        raise Refused(path, "an object")
    method = value.get("method")
    if method not in CALIBRATORS:
        raise Refused(f"{path}.method", f"one of {', '.join(map(repr, CALIBRATORS))}")
    kind = record(ISOTONIC, Isotonic) if method == "isotonic" else record(PLATT, Platt)
    out: Isotonic | Platt = kind(value, path, top)
    return out


def score_model(allowed: tuple[str, ...]) -> tuple[Field, ...]:
    """The fields of a head's model over members of ``allowed``."""
    one_each = "one number per feature"
    return (
        Field(
            "features",
            tuple_of(STRINGS),
            lambda v: f"members of {list(allowed)} (unknown: {[m for m in v if m not in allowed]})",
            lambda v, *_: len(v) >= 1 and set(v) <= set(allowed),
        ),
        Field("mean", tuple_of(NUMBERS), one_each, lambda v, o, _: len(v) == len(o["features"])),
        Field(
            "scale",
            tuple_of(NUMBERS),
            f"positive, {one_each}",
            lambda v, o, _: len(v) == len(o["features"]) and all(s > 0 for s in v),
        ),
        Field("coef", tuple_of(NUMBERS), one_each, lambda v, o, _: len(v) == len(o["features"])),
        Field("intercept", NUMBER),
        Field("calibrator", calibrator),
    )


OPERATING_POINT = (
    Field("rule", TEXT),
    Field("target_fpr", or_null(NUMBER)),
    Field("threshold", NUMBER, "in [0, 1]", lambda v, *_: 0 <= v <= 1),
    *(Field(name, NUMBER) for name in ("fpr", "tpr", "precision", "f1")),
    *(Field(name, or_null(tuple_of(PAIR)), default=None) for name in ("fpr_range", "tpr_range", "fpr_interval")),
    Field("negatives", or_null(NUMBER), default=None),
)


def head(allowed: tuple[str, ...]) -> Kind:
    """A head over members of ``allowed``."""
    return record(
        (
            Field("model", record(score_model(allowed), ScoreModel)),
            Field("operating_point", record(OPERATING_POINT, OperatingPoint)),
            Field(
                "kind",
                or_null(TEXT),
                f"one of {list(KINDS)} or absent",
                lambda v, *_: v is None or v in KINDS,
                default=None,
            ),
        ),
        Head,
    )


SETTLE = (
    Field("below", NUMBER, "in [0, 1]", lambda v, *_: 0 <= v <= 1, default=0.0),
    Field("above", NUMBER, "in [below, 1]", lambda v, o, _: o["below"] <= v <= 1, default=1.0),
)
ROUND_HEADS = (
    Field("k", INTEGER, "at least 2 and not the calibration's k", lambda v, _, t: 2 <= v != t["settings"].get("k")),
    Field("heads", list_of(head(MEMBERS)), "one head or more", lambda v, *_: len(v) >= 1),
    Field("settle", record(SETTLE, Settle)),
)


def _in_unit(v: float | None) -> bool:
    return v is not None and 0 < v < 1


FITTED_ON = (
    Field("source", TEXT),
    Field("data", COUNTS),
    Field("protocol", ANY_JSON),
    Field("label", TEXT),
    Field("n", INTEGER),
    Field("positives", INTEGER),
    Field("base_rate", NUMBER, "in (0, 1)", lambda v, *_: _in_unit(v)),
    Field("folds", INTEGER),
    Field("seed", INTEGER),
    Field("cv", SCORES),
    Field("samples", or_null(TEXT), default=None),
    Field(
        "sentence_base_rate",
        or_null(NUMBER),
        "in (0, 1) with a sentence head",
        default=None,
        check=lambda v, _, t: t["sentence"] is None or _in_unit(v),
    ),
    Field("sentence_n", or_null(INTEGER), default=None),
    Field(
        "claim_base_rate",
        or_null(NUMBER),
        "in (0, 1) with a claim head",
        default=None,
        check=lambda v, _, t: t["claim"] is None or _in_unit(v),
    ),
    Field("claim_n", or_null(INTEGER), default=None),
    Field("refit", or_null(TEXT), default=None),
)


def _reads_sentence_verdict(top: dict[str, Any]) -> bool:
    """True when a head read so far (the first, ``more_heads``, the rounds') reads ``sentence_verdict``."""
    heads = (*top["more_heads"], *(h for s in top["stages"] for h in s.heads))
    return "sentence_verdict" in top["model"].features or any("sentence_verdict" in h.members for h in heads)


# The file's top level, in the order read (a check reads the fields above it); ``dump`` writes them in the
# order of format 1's files, then format 2's.
FILE = (
    Field("settings", OBJECT),
    Field(
        "fingerprint",
        TEXT,
        "the fingerprint of its settings (the file was edited?)",
        lambda v, _, t: v == calibration_fingerprint(t["settings"]),
    ),
    Field("model", record(score_model(MEMBERS), ScoreModel)),
    Field("operating_point", record(OPERATING_POINT, OperatingPoint)),
    Field("more_heads", list_of(head(MEMBERS)), default=(), since=FORMAT),
    Field(
        "stages",
        list_of(record(ROUND_HEADS, RoundHeads)),
        "one entry per k",
        lambda v, *_: len({s.k for s in v}) == len(v),
        default=(),
        since=FORMAT,
    ),
    Field(
        "sentence",
        or_null(head(SENTENCE_MEMBERS)),
        "a head when another head reads sentence_verdict",
        lambda v, _, t: v is not None or not _reads_sentence_verdict(t),
        default=None,
        since=FORMAT,
    ),
    Field("claim", or_null(head(CLAIM_MEMBERS)), default=None, since=FORMAT),
    Field(
        "short_only",
        tuple_of(STRINGS),
        f"members of {list(SHORT_ONLY)}",
        lambda v, *_: set(v) <= set(SHORT_ONLY),
        default=(),
        since=FORMAT,
    ),
    Field("fitted_on", record(FITTED_ON, FittedOn)),
    Field("bbwd_version", TEXT),
)
# the calibration's fields that ``parse`` returns and ``dump`` takes (``model.Calibration``'s, but its origin)
STORED: Final = (
    *("heads", "fingerprint", "settings", "fitted_on", "bbwd_version"),
    *("sentence", "claim", "rounds", "short_only"),  # format 2's (``rounds``: the file's ``stages``)
)
FILE_KEYS: Final = {"rounds": "stages"}  # a field whose key in the file is not its name


def parse(text: str | bytes, where: str) -> dict[str, Any]:
    """A calibration's fields (``STORED``) from its file, checked.

    Parameters
    ----------
    text : str or bytes
        The file's JSON (bytes: UTF-8), in format 1 or 2.
    where : str
        The file, as messages name it.

    Returns
    -------
    dict of str to Any
        ``heads`` (the first head's ``model`` and ``operating_point``, then ``more_heads``) and the other fields.

    Raises
    ------
    BBWDError
        One line naming the file and the first field that cannot be right.
    """
    try:
        body = json.loads(text, parse_constant=_no_constant)  # bytes: UTF-8 or a ValueError
    except ValueError as exc:
        raise BBWDError(f"{where} is not a calibration file: {exc}") from None
    if not isinstance(body, dict) or body.get("format") not in FORMATS:
        raise BBWDError(f"{where} is not a calibration file (field 'format' is not {FORMAT!r} or {FORMAT_1!r})")
    try:
        top = read_fields(body, FILE, "", {"format": body["format"]})
    except Refused as exc:
        raise BBWDError(f"{where}: {exc}") from None
    first = Head(top.pop("model"), top.pop("operating_point"))
    return {"heads": (first, *top.pop("more_heads")), **{name: top[FILE_KEYS.get(name, name)] for name in STORED[1:]}}


def dump(fields: Mapping[str, Any]) -> str:
    """A calibration's file from its fields (``STORED``): format 1 when it has one head over FEATURES and nothing more
    (so that such a file keeps its bytes and its id), else format 2; plain numbers and strings, no NaN.

    Parameters
    ----------
    fields : mapping of str to Any
        The calibration's fields; its first head judges every kind of answer (its ``kind`` None).

    Returns
    -------
    str
        The JSON document, indented by one space, with a final newline.
    """
    first, *more = fields["heads"]
    if first.kind is not None:
        raise ValueError(f"a calibration's first head judges every kind of answer, not only {first.kind!r}")
    body: dict[str, Any] = {"format": FORMAT_1, "model": first.model, "operating_point": first.operating_point}
    body.update({name: fields[name] for name in ("fingerprint", "settings", "fitted_on", "bbwd_version")})
    sentence, claim, rounds, short_only = (fields[name] for name in ("sentence", "claim", "rounds", "short_only"))
    if more or sentence is not None or claim is not None or rounds or short_only or first.members != FEATURES:
        body.update(format=FORMAT, more_heads=more, sentence=sentence)
        body.update({"claim": claim} if claim is not None else {})  # each only when present: older files' bytes
        body.update({"stages": rounds} if rounds else {})
        body.update({"short_only": short_only} if short_only else {})
    return json.dumps(_plain(body), indent=1, allow_nan=False) + "\n"


def _plain(value: Any) -> Any:
    """A value as JSON holds it: dataclasses as objects, tuples as lists, the fields ``LATER`` left out when None."""
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if not (k in LATER and v is None)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number in plain JSON")
