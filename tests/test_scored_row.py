"""A scored row (a line of batch's output) read and written as one type: the same object, key order included."""

import json
from pathlib import Path

import pytest

from blackbox_wd.scored_row import ScoredRow, is_scored_row

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("name", ["report_scores.jsonl", "sac3_scores.jsonl"])
def test_a_fixtures_rows_round_trip_with_their_key_order(name):
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    assert lines
    for n, line in enumerate(lines, start=1):
        row = json.loads(line)
        again = ScoredRow.from_dict(row).to_dict()
        assert again == row and list(again) == list(row) and is_scored_row(n, row)
        assert json.dumps(again) == json.dumps(row)


def test_its_fields_read_typed():
    row = json.loads((FIXTURES / "report_scores.jsonl").read_text(encoding="utf-8").splitlines()[0])
    scored = ScoredRow.from_dict(row)
    assert (scored.id, scored.line, scored.label) == (row["id"], 1, row["label"])
    assert scored.avg_wd == row["avg_wd"] and scored.p_hallucination == row["p_hallucination"]
    assert scored.flag is row["flag"] and scored.members == row["members"] and scored.rounds is None
    assert scored.n_samples == row["n_samples"] and scored.token_counts == row["token_counts"]
    assert scored.calibration == row["calibration"] and scored.fingerprint == row["fingerprint"]


def test_a_row_without_a_calibration_or_label_writes_neither():
    row = {"id": "a", "line": 1, "avg_wd": None, "error": "line 1: no", "transient": True, "settings": {},
           "fingerprint": "f", "input_hash": "h"}  # fmt: skip
    scored = ScoredRow.from_dict(row)
    assert scored.to_dict() == row and scored.calibration is None and scored.label is None and scored.transient


def test_a_line_that_is_not_a_scored_row_is_refused():
    with pytest.raises(KeyError):
        ScoredRow.from_dict({"id": "a", "line": 1})
    assert not is_scored_row(2, {"id": "a", "line": 1, "error": None, "fingerprint": "f", "input_hash": "h"})
