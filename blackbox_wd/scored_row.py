"""A scored row: one line of ``bbwd batch``'s output (and of a re-judged file), read and written as one type.

:class:`ScoredRow` holds a line's own keys as fields (the record's id and line, the calibration's id, the record's
label, the error, the settings it was scored under) and the result's fields (``run.result.result_row`` of batch's
``RowFields``: the scores, the verdict, the usage, ...) as ``scores``, in the line's order. ``from_dict`` and
``to_dict`` convert a line; ``to_dict(from_dict(row)) == row``, key order included, so that a line read and
written again is the same bytes. The typed properties read the fields a reader most needs (``p_hallucination``,
``flag``, ``members``, ``rounds``, ...). An ``eval`` row (``results.jsonl``) is not one: it has no line number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from blackbox_wd.records import JSONObject, JSONView

ROW_KEYS = ("id", "line", "error", "fingerprint", "input_hash")  # every line of batch's output has these
HEAD = ("id", "line")  # a line's own keys before the result's fields
TAIL = ("calibration", "label", "error", "transient", "settings", "fingerprint", "input_hash")  # and after them


@dataclass
class ScoredRow:
    """One line of ``bbwd batch``'s output.

    Parameters
    ----------
    id : str, int or None
        The record's id (None when its line did not parse).
    line : int
        The record's line in the input, from 1.
    scores : dict
        The result's fields in the line's order (``run.result.result_row``; empty values for a record without a
        result), the rounds of ``-k auto`` under their key ``stages``.
    calibration : str or None
        The id of the calibration that gave the verdict; written only with one.
    label : int, float or None
        The record's label; written only when it has one.
    error : str or None
        Why the record has no result.
    transient : bool
        The error may pass (network, 5xx, 429): a resume computes the record again.
    settings : dict
        The run's reported settings with their fingerprint (``Detector.reported_settings``).
    fingerprint : str
        The settings' fingerprint.
    input_hash : str
        The hash of the record's input line.
    """

    id: str | int | None
    line: int
    scores: JSONObject = field(default_factory=dict)
    calibration: str | None = None
    label: int | float | None = None
    error: str | None = None
    transient: bool = False
    settings: JSONObject = field(default_factory=dict)
    fingerprint: str = ""
    input_hash: str = ""

    @classmethod
    def from_dict(cls, row: JSONView) -> ScoredRow:
        """The row of a parsed line; KeyError when it lacks a key of ``ROW_KEYS``.

        >>> ScoredRow.from_dict({"id": "a", "line": 1, "avg_wd": 0.5, "error": None, "transient": False,
        ...                      "settings": {}, "fingerprint": "f", "input_hash": "h"}).avg_wd
        0.5
        """
        missing = [key for key in ROW_KEYS if key not in row]
        if missing:
            raise KeyError(missing[0])
        return cls(
            id=row["id"],
            line=int(row["line"]),
            scores={key: value for key, value in row.items() if key not in HEAD and key not in TAIL},
            calibration=row.get("calibration"),
            label=row.get("label"),
            error=row["error"],
            transient=bool(row.get("transient", False)),
            settings=dict(row.get("settings") or {}),
            fingerprint=str(row["fingerprint"]),
            input_hash=str(row["input_hash"]),
        )

    def to_dict(self) -> JSONObject:
        """The line's JSON object: id and line, the result's fields, then the calibration's id and the label (when
        there are), the error, whether it is transient, the settings, the fingerprint and the input's hash."""
        row: JSONObject = {"id": self.id, "line": self.line, **self.scores}
        if self.calibration is not None:
            row["calibration"] = self.calibration
        if self.label is not None:
            row["label"] = self.label
        row.update(
            error=self.error,
            transient=self.transient,
            settings=self.settings,
            fingerprint=self.fingerprint,
            input_hash=self.input_hash,
        )
        return row

    def score(self, name: str) -> float | None:
        """The result's field ``name`` as a number (None when it has none or it is not a number)."""
        value = self.scores.get(name)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    @property
    def avg_wd(self) -> float | None:
        """AvgWD (None: the row skipped the teacher pass, or has an error)."""
        return self.score("avg_wd")

    @property
    def p_hallucination(self) -> float | None:
        """The verdict's probability of hallucination (None without a calibration)."""
        return self.score("p_hallucination")

    @property
    def flag(self) -> bool | None:
        """The verdict's flag (None without a calibration)."""
        value = self.scores.get("flag")
        return None if value is None else bool(value)

    @property
    def members(self) -> list[str] | None:
        """The members the verdict rests on (None without a calibration)."""
        value = self.scores.get("members")
        return None if value is None else [str(m) for m in value]

    @property
    def n_samples(self) -> int:
        """The samples scored (0 without a result)."""
        return int(self.scores.get("n_samples") or 0)

    @property
    def token_counts(self) -> list[int]:
        """Each sample's token count."""
        return [int(n) for n in self.scores.get("token_counts") or []]

    @property
    def rounds(self) -> list[JSONObject] | None:
        """``-k auto``: each round looked at (the line's ``stages``); None for a fixed K."""
        return self.scores.get("stages")


def is_scored_row(n: int, row: JSONView) -> bool:
    """True when ``row`` is line ``n`` of batch's output: it has every key of ``ROW_KEYS`` and its line is n."""
    return all(key in row for key in ROW_KEYS) and row["line"] == n
