"""``bbwd report``: one self-contained HTML page of a scored log (the rows of ``rows.py``, their numbers from
``calibration.evaluation.verdicts``, charted).

The page inlines everything it loads (its data as JSON, its script and style, and the vendored Tabulator and uPlot
files in ``assets/``, their versions and licences in ``assets/README.md``), so it opens offline. Text from the log
is data, never markup: the JSON block escapes ``<``, ``>``, ``&`` and U+2028/2029, and the page's script puts log
text into the page with ``textContent`` only.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from blackbox_wd.calibration.evaluation.verdicts import LabelledVerdicts, histogram, labelled_verdicts, risks
from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS, Calibration
from blackbox_wd.doors.report.labelling import Labelling, labelling
from blackbox_wd.doors.report.rows import ReportRow, read_rows
from blackbox_wd.errors import BBWDError

MAX_BYTES = 55_000_000  # the page's data is cut to fit this (its goal: at most 60 MB with 100,000 rows)
ASSETS = (
    "tabulator.min.css",
    "uPlot.min.css",
    "report.css",
    "tabulator.min.js",
    "uPlot.iife.min.js",
    "report.js",
    "labelling.js",
)


@dataclass(frozen=True)
class Limits:
    """How much text of a row the page keeps (characters), halved until the page fits ``MAX_BYTES``."""

    prompt: int = 2000
    answer: int = 4000
    sample: int = 800
    samples: int = 10
    claim: int = 400

    def halved(self) -> Limits:
        return Limits(*(max(1 if name == "samples" else 40, v // 2) for name, v in asdict(self).items()))


@dataclass
class Promise:
    """The calibration that judged the rows and what it promises: its threshold and FPR (with its interval)."""

    id: str | None
    origin: str | None = None  # where it was loaded from (None: not found; the rows only name it)
    threshold: float | None = None
    fpr: float | None = None
    fpr_interval: tuple[float, float] | None = None
    tpr: float | None = None
    target_fpr: float | None = None
    heads: int = 1  # its heads: each row is judged by the first whose members it has (and of its kind of answer)
    thresholds: tuple[float, float] | None = None  # the lowest and highest threshold of its heads
    note: str | None = None


@dataclass
class Summary:
    """The page's header, charts and labels section."""

    rows: int
    flagged: int
    errors: int
    skipped: list[str]
    risk_from: str  # "p_hallucination", or "avg_wd rank" where no row has a verdict
    promise: Promise | None
    settings: dict[str, str]
    samples: int
    target_tokens: int
    histogram: dict[str, list[float | int]]
    labelled: LabelledVerdicts | None
    cut: Limits = field(default_factory=Limits)
    cut_note: str | None = None


def _shipped(calibration_id: str) -> Calibration | None:
    """The shipped calibration with this id, if one is."""
    for path in sorted(PACKAGE_CALIBRATIONS.glob("*.json")):
        try:
            cal = Calibration.load(path)
        except BBWDError:
            continue
        if cal.id == calibration_id:
            return cal
    return None


def promise_of(rows: list[ReportRow], calibration: Path | None = None) -> Promise | None:
    """The calibration the rows name and its promise: from ``calibration`` when given, else the shipped one with
    their id; the rows' word alone when neither is it.

    Parameters
    ----------
    rows : list of ReportRow
    calibration : Path, optional
        A calibration file (``bbwd calibrate``): what it promises is shown, with a note when the rows name another.

    Returns
    -------
    Promise or None
        None when no row names a calibration (and no file is given).
    """
    ids = Counter(r.calibration for r in rows if r.calibration)
    named = ids.most_common(1)[0][0] if ids else None
    others = f" ({len(ids) - 1} other calibration(s) judged some rows)" if len(ids) > 1 else ""
    cal = Calibration.load(calibration) if calibration is not None else _shipped(named) if named else None
    if cal is None:
        if named is None:
            return None
        return Promise(named, note=f"the rows name calibration {named}, not found: pass its file with --calibration")
    note = None
    if named is not None and cal.id != named:
        note = f"the rows were judged by calibration {named}, not by this file's ({cal.id})"
    elif named is None:
        note = "no row names a calibration: this file's promise is shown for reference"
    op = cal.operating_point
    thresholds = [h.operating_point.threshold for h in cal.heads]
    origin = cal.origin or (str(calibration) if calibration else None)
    if calibration is None and origin:
        origin = f"shipped {Path(origin).name}"
    return Promise(
        id=cal.id,
        origin=origin,
        threshold=op.threshold,
        fpr=op.fpr,
        fpr_interval=(op.fpr_interval[0], op.fpr_interval[1]) if op.fpr_interval else None,
        tpr=op.tpr,
        target_fpr=op.target_fpr,
        heads=len(thresholds),
        thresholds=(min(thresholds), max(thresholds)),
        note=" ".join(x for x in (note, others.strip()) if x) or None,
    )


def _settings(rows: list[ReportRow]) -> dict[str, str]:
    """The teacher, target and K the rows were scored with (several values joined; 'recorded' samples as such)."""
    out = {}
    for name in ("teacher", "target", "k"):
        values = Counter(str(r.settings.get(name)) for r in rows if r.settings and r.settings.get(name) is not None)
        out[name] = ", ".join(v for v, _ in values.most_common()) or "?"
    ks = Counter(r.n_samples for r in rows if r.n_samples)
    if out["k"] == "?" and ks:
        out["k"] = ", ".join(str(k) for k, _ in ks.most_common())
    return out


def page_summary(rows: list[ReportRow], skipped: list[str], calibration: Path | None = None) -> Summary:
    """The page's header figures, histogram and labelled section of the rows.

    Parameters
    ----------
    rows : list of ReportRow
    skipped : list of str
        The lines that were not scored rows, named.
    calibration : Path, optional
        A calibration file to show the promise of (``promise_of``).

    Returns
    -------
    Summary
    """
    risk, risk_from = risks(rows)
    return Summary(
        rows=len(rows),
        flagged=sum(bool(r.flag) for r in rows),
        errors=sum(r.error is not None for r in rows),
        skipped=skipped,
        risk_from=risk_from,
        promise=promise_of(rows, calibration),
        settings=_settings(rows),
        samples=sum(r.n_samples for r in rows),
        target_tokens=sum(r.target_tokens for r in rows),
        histogram=histogram(risk, rows),
        labelled=labelled_verdicts(rows, risk, risk_from == "p_hallucination"),
    )


def _round(v: float | None) -> float | None:
    return None if v is None else float(f"{v:.4g}")


def _cut(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters]"


def payload(rows: list[ReportRow], risk: list[float | None], limits: Limits) -> dict[str, Any]:
    """The rows as the page's data: one array per column (compact), the texts cut to ``limits``.

    Parameters
    ----------
    rows : list of ReportRow
    risk : list of float or None
    limits : Limits

    Returns
    -------
    dict
        Columns ``id``, ``line``, ``risk``, ``flag``, ``label``, ``error``, ``answer``, ``prompt``, ``samples``,
        ``sentences`` ([start, end, p, score, flag] each, within the kept answer), ``claims`` ([text, p, score,
        flag] each) and ``members`` ([index into ``member_sets``, value, ...]), and ``member_sets``.
    """
    sets: dict[tuple[str, ...], int] = {}
    members = []
    for r in rows:
        names = tuple(r.members)
        index = sets.setdefault(names, len(sets))
        members.append([index, *(_round(v) for v in r.members.values())] if names else None)
    answers = [_cut(r.answer, limits.answer) for r in rows]
    return {
        "id": [r.id for r in rows],
        "line": [r.line for r in rows],
        "risk": [_round(p) for p in risk],
        "flag": [None if r.flag is None else int(r.flag) for r in rows],
        "label": [r.label for r in rows],
        "error": [_cut(r.error, limits.claim) for r in rows],
        "answer": answers,
        "prompt": [_cut(r.prompt, limits.prompt) for r in rows],
        "samples": [[_cut(s, limits.sample) for s in r.samples[: limits.samples]] or None for r in rows],
        "sentences": [
            [
                [m.start, m.end, _round(m.p), _round(m.score), None if m.flag is None else int(m.flag)]
                for m in r.sentences
                if m.end <= min(len(a or ""), limits.answer)
            ]
            or None
            for r, a in zip(rows, answers, strict=True)
        ],
        "claims": [
            [[_cut(m.text, limits.claim), _round(m.p), _round(m.score), m.flag] for m in r.claims] or None for r in rows
        ],
        "members": members,
        "member_sets": [list(names) for names in sets],
    }


def script_json(value: Any) -> str:
    """JSON safe inside a ``<script type="application/json">`` block: ``<``, ``>``, ``&`` and U+2028/2029 escaped.

    Examples
    --------
    >>> script_json({"a": "</script><b>&"})
    '{"a":"\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e\\\\u0026"}'
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for char, code in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, code)
    return text


def _asset(name: str) -> str:
    return resources.files("blackbox_wd.doors.report").joinpath("assets", name).read_text(encoding="utf-8")


def page_html(summary: Summary, data_json: str, title: str, labels: Labelling | None = None) -> str:
    """The page's HTML: the template with the summary, the data block and the inlined assets.

    Parameters
    ----------
    summary : Summary
    data_json : str
        The rows (``payload``) as ``script_json`` gives them.
    title : str
    labels : Labelling, optional
        The labelling mode's key and suggested rows (``bbwd report --suggest N``); None: a page without one.

    Returns
    -------
    str
        The whole page.
    """
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = env.from_string(_asset("page.html.j2"))
    shown = {k: v for k, v in asdict(summary).items() if k != "skipped"}  # the script reads no skipped line
    meta = {
        "summary": shown,
        "title": title,
        "generated": time.strftime("%Y-%m-%d %H:%M"),
        "labelling": None if labels is None else asdict(labels),
    }
    return template.render(
        title=title,
        s=summary,
        labelling=labels,
        generated=meta["generated"],
        meta_json=Markup(script_json(meta)),  # noqa: S704 - escaped for a script block by script_json
        data_json=Markup(data_json),  # noqa: S704
        assets={name: Markup(_asset(name)) for name in ASSETS},  # noqa: S704 - the package's own files
    )


@dataclass
class Written:
    """A report written: its file, size, rows and the lines that were not rows."""

    path: Path
    bytes: int
    rows: int
    flagged: int
    errors: int
    skipped: list[str]
    limits: Limits


def write_report(
    scores: Path,
    output: Path,
    log: Path | None = None,
    calibration: Path | None = None,
    warn: Callable[[str], None] | None = None,
    max_bytes: int = MAX_BYTES,
    suggest: int | None = None,
) -> Written:
    """Read scored rows and write their page.

    Parameters
    ----------
    scores : Path
        ``batch``'s output, ``eval``'s ``results.jsonl`` or a re-judged file.
    output : Path
        The HTML file written.
    log : Path, optional
        The log the rows were scored from: their prompts, samples and answers (``rows.read_rows``).
    calibration : Path, optional
        A calibration file whose promise the header shows (default: the shipped one the rows name).
    warn : callable, optional
        Called with one line for each input line that is not a scored row.
    max_bytes : int
        The texts are cut (halved, in turn) until the page's data fits this.
    suggest : int, optional
        A labelling mode, its first rows the ``suggest`` that ``bbwd calibrate --suggest`` picks
        (``labelling.labelling``).

    Returns
    -------
    Written

    Raises
    ------
    BBWDError
        No scored rows, a missing file, or ``-o`` is the input.
    """
    if output.resolve() == scores.resolve() or (log is not None and output.resolve() == log.resolve()):
        raise BBWDError(f"-o {output} is an input: write the page to another file")
    read = read_rows(scores, log, warn)
    labels = None if suggest is None else labelling(scores, read.rows, suggest)
    summary = page_summary(read.rows, read.skipped, calibration)
    risk, _ = risks(read.rows)
    limits = Limits()
    data = script_json(payload(read.rows, risk, limits))
    while len(data.encode()) > max_bytes and limits != limits.halved():
        limits = limits.halved()
        data = script_json(payload(read.rows, risk, limits))
    if limits != Limits():
        summary.cut = limits
        summary.cut_note = (
            f"texts cut to fit the page: prompts to {limits.prompt} characters, answers to {limits.answer}, "
            f"{limits.samples} samples of {limits.sample}"
        )
    html = page_html(summary, data, f"bbwd report: {scores.name}", labels)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(html, encoding="utf-8")
    return Written(output, len(html.encode()), summary.rows, summary.flagged, summary.errors, read.skipped, limits)
