"""Labels kept apart from the rows (``bbwd report``'s "Download labels": ``{"id": ..., "label": 0 or 1}`` a line)
joined to the scored rows by id, for ``bbwd calibrate --labels``.

A row's id is its ``id`` field as text, else its line number (the rule ``bbwd report``'s page names rows by). The
file's labels are the only labels of the joined rows: a row it does not name loses the labels it carried (``label``
and the passage labels), so that the fit reads the labels given and no other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackbox_wd.calibration.labelled import json_objects
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import PASSAGE_LABELS, JSONView


@dataclass
class Joined:
    """The rows of each results file with the labels joined, and how many rows and ids were labelled."""

    files: list[tuple[str, list[dict[str, Any]]]]  # each file's name and its rows
    rows: int  # rows given a label
    ids: int  # labels read (one per id)

    def write(self, folder: Path) -> list[Path]:
        """Write each file's joined rows to ``folder/<its index>/<its name>`` (the name kept: the rows' data set is
        their file's name when they carry no ``source``); return the paths, in order."""
        paths = []
        for n, (name, rows) in enumerate(self.files):
            path = folder / str(n) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
            paths.append(path)
        return paths


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:80]


def read_labels(path: Path, ids: set[str], scores: str) -> dict[str, int]:
    """Each id's label, from a labels file; BBWDError naming the line for a line that is not a JSON object with an
    id and a label, an id that is not one of ``ids``, an id given twice, or a label that is not 0 or 1.

    Parameters
    ----------
    path : Path
        JSONL, ``{"id": ..., "label": 0 or 1}`` a line (blank lines are skipped); an id is a string or an integer.
    ids : set of str
        The rows' ids (``row_id``).
    scores : str
        The rows' files, as the errors name them.

    Returns
    -------
    dict of str to int
        Label by id, in the file's order.
    """
    if not path.is_file():
        raise BBWDError(f"--labels not found: {path}")
    labels: dict[str, int] = {}
    first: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path} line {n}"
            try:
                entry = json.loads(line)
            except ValueError:
                raise BBWDError(f"{where}: not JSON (one {{\"id\": ..., \"label\": 0 or 1}} a line)") from None
            if not isinstance(entry, dict) or "id" not in entry or "label" not in entry:
                raise BBWDError(f"{where}: expected a JSON object with 'id' and 'label'")
            raw, label = entry["id"], entry["label"]
            if not isinstance(raw, (str, int)) or isinstance(raw, bool):
                raise BBWDError(f"{where}: id {_shown(raw)} must be a string or an integer")
            key = str(raw)
            if key not in ids:
                raise BBWDError(f"{where}: id {_shown(key)} is not a row of {scores}")
            if key in first:
                raise BBWDError(f"{where}: id {_shown(key)} given twice (first on line {first[key]})")
            if label not in (0, 1) or isinstance(label, bool):
                raise BBWDError(f"{where}: id {_shown(key)}: field 'label' must be 0 or 1 (got {_shown(label)})")
            first[key] = n
            labels[key] = int(label)
    if not labels:
        raise BBWDError(f"{path} holds no labels (one {{\"id\": ..., \"label\": 0 or 1}} a line)")
    return labels


def row_id(row: JSONView, line: int) -> str:
    """A row's id as the page names it: its ``id`` as text, else its line number.

    Examples
    --------
    >>> row_id({"id": 7}, 3), row_id({}, 3)
    ('7', '3')
    """
    return str(row.get("id", line))


def join_labels(results: Sequence[Path], labels: Path, field: str = "label") -> Joined:
    """The rows of ``results`` with the labels of ``labels`` joined by id (``read_labels``, ``row_id``): a named row
    gets its label in ``field``, every other row loses ``field`` and the passage labels.

    Parameters
    ----------
    results : sequence of Path
        The scored rows (JSONL; every row of an id gets its label, e.g. the same prompt scored at several K).
    labels : Path
        The labels file.
    field : str, default="label"
        The row field the label goes to (the fit's ``--label``).

    Returns
    -------
    Joined

    Raises
    ------
    BBWDError
        A results line that is not a JSON object, or a labels line as ``read_labels`` says.
    """
    files = [(path.name, list(json_objects(path))) for path in results]
    ids = {row_id(row, n) for _, rows in files for n, row in rows}
    given = read_labels(labels, ids, ", ".join(map(str, results)))
    joined, count = [], 0
    for name, rows in files:
        out = []
        for n, row in rows:
            kept = {k: v for k, v in row.items() if k != field and k not in PASSAGE_LABELS}
            label = given.get(row_id(row, n))
            if label is not None:
                kept[field] = label
                count += 1
            out.append(kept)
        joined.append((name, out))
    return Joined(joined, count, len(given))
