"""Labels apart from the rows (``calibration.labels_file``), joined by id for ``bbwd calibrate --labels``: the join,
and each bad line of the labels file a one-line error (exit 2) naming its line and id; ``suggest.suggested_rows``,
the rows ``bbwd calibrate --suggest`` and ``bbwd report --suggest`` pick."""

from __future__ import annotations

from pathlib import Path

import pytest

from blackbox_wd.calibration.labels_file import join_labels
from blackbox_wd.calibration.suggest import suggested_rows
from blackbox_wd.errors import BBWDError
from tests.cli_support import jsonl, run_cli

SCORES = Path(__file__).resolve().parents[2] / "fixtures" / "labels_scores.jsonl"
FIRST, SECOND = "sac3_nq_open.100", "sac3_nq_open.141"


def labels_file(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_labels_are_joined_by_id_and_the_rows_own_labels_dropped(tmp_path):
    path = labels_file(tmp_path, f'{{"id": "{SECOND}", "label": 0}}', "", f'{{"id": "{FIRST}", "label": 1}}')
    joined = join_labels([SCORES], path)
    assert joined.ids == 2 and joined.rows == 2
    ((name, rows),) = joined.files
    assert name == "labels_scores.jsonl" and len(rows) == 40
    labelled = {r["id"]: r["label"] for r in rows if "label" in r}
    assert labelled == {FIRST: 1, SECOND: 0}  # the fixture's own labels are 0 and 1: replaced, the others dropped
    untouched = {k: v for k, v in jsonl(SCORES)[5].items() if k != "label"}
    assert rows[5] == untouched
    (written,) = joined.write(tmp_path / "out")
    assert written.name == "labels_scores.jsonl" and jsonl(written) == rows


def test_ids_of_rows_without_one_are_their_line_numbers(tmp_path):
    scores = tmp_path / "scores.jsonl"
    scores.write_text('{"avg_wd": 1, "label": 1}\n{"id": 7, "avg_wd": 2}\n', encoding="utf-8")
    joined = join_labels([scores], labels_file(tmp_path, '{"id": "1", "label": 0}', '{"id": 7, "label": 1}'))
    assert joined.files[0][1] == [{"avg_wd": 1, "label": 0}, {"id": 7, "avg_wd": 2, "label": 1}]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "nope", "label": 1}', 'line 2: id "nope" is not a row of '),
        (f'{{"id": "{FIRST}", "label": 0}}', f'line 2: id "{FIRST}" given twice (first on line 1)'),
        (f'{{"id": "{SECOND}", "label": 2}}', f"line 2: id \"{SECOND}\": field 'label' must be 0 or 1 (got 2)"),
        (f'{{"id": "{SECOND}", "label": true}}', "field 'label' must be 0 or 1 (got true)"),
        (f'{{"id": "{SECOND}", "label": "1"}}', "field 'label' must be 0 or 1 (got \"1\")"),
        (f'{{"id": "{SECOND}"}}', "line 2: expected a JSON object with 'id' and 'label'"),
        ("[1, 0]", "line 2: expected a JSON object with 'id' and 'label'"),
        ("{not json", 'line 2: not JSON (one {"id": ..., "label": 0 or 1} a line)'),
        ('{"id": [1], "label": 1}', "line 2: id [1] must be a string or an integer"),
    ],
)
def test_a_bad_labels_line_is_a_one_line_error_naming_it(tmp_path, line, message):
    path = labels_file(tmp_path, f'{{"id": "{FIRST}", "label": 1}}', line)
    with pytest.raises(BBWDError, match="line 2") as info:
        join_labels([SCORES], path)
    assert message in str(info.value) and str(info.value).startswith(f"{path} line 2: ")
    code, err = run_cli("calibrate", str(SCORES), "--labels", str(path), "-o", str(tmp_path / "cal.json"))
    assert code == 2
    assert err.strip().splitlines() == [f"error: {info.value}"]
    assert not (tmp_path / "cal.json").exists()


def test_no_labels_a_missing_file_and_suggest_with_labels_are_errors(tmp_path):
    with pytest.raises(BBWDError, match="holds no labels"):
        join_labels([SCORES], labels_file(tmp_path, "", "  "))
    with pytest.raises(BBWDError, match="--labels not found"):
        join_labels([SCORES], tmp_path / "none.jsonl")
    code, err = run_cli("calibrate", str(SCORES), "--labels", str(tmp_path / "x"), "--suggest", "3")
    assert code == 2 and "give one of them" in err


def test_the_suggested_rows_index_all_the_rows():
    assert suggested_rows([None, 0.9, None, 0.1], 2) == [1, 3]  # the rows without a risk are never picked
    with pytest.raises(BBWDError, match="no row with a p_hallucination"):
        suggested_rows([None, None], 1)
