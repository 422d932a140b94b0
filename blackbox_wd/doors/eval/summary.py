"""The evaluation report's ``summary.md`` from per-prompt results (its figures: ``eval.report``).

A per-prompt result is a dict (a row of ``eval.run``, or ``detector.Result.to_dict()`` plus labels)
holding:

* labels, 1 = hallucination, 0 = correct (``LABEL_NAMES``): ``label`` (primary), optionally
  ``label_em``, ``label_first``, ``label_em_first``, ``label_judge``;
* the score of every method, looked up as ``r[m]``, else ``r["baselines"][m]``, else
  ``r["scores"][m]`` for m in avg_wd, eigen_wd, answer_wd, sentence_wd, lne, ls, es, er, dse
  (missing/None -> NaN, and that prompt is left out of that method's metrics; SentenceWD is shown
  only when a result has it);
* ``D``: the K x K distance matrix (nested lists or an array), for the heat maps;
* optionally ``id``, ``settings``, ``kind``, ``protocol``, ``label_from``, ``dse_judge``,
  ``timings`` (seconds per stage), ``responses``, ``finish_reasons``, ``answer`` and
  ``answer_finish_reason`` (for the truncation rates);
* optionally ``sentence_labels`` (one of ``eval.data.SENTENCE_LABELS`` per sentence of the judged
  answer) with ``sentences`` (as many {"text", "start", "end", "score"} objects; None: none scored),
  for the sentence-level section (SelfCheckGPT's AUC-PR, ``metrics.sentence_auc_pr``) and
  ``sentence_pr.png``.

Per label, summary.md gives the base rate and the prompts per class, then per method AUROC with its
95% bootstrap CI, AUPRC and PRR (``blackbox_wd.calibration.metrics``), and for AvgWD and EigenWD the paired bootstrap
CI of the AUROC difference to the best baseline (the baseline with the highest AUROC) with its
verdict. Only a verdict the CI supports (better / worse) is bold; nothing is bolded for being the
largest point estimate.

Figures are drawn on ``matplotlib.figure.Figure`` (Agg canvas), never through pyplot.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np

from blackbox_wd.calibration.metrics import (
    N_BOOTSTRAP,
    SEED,
    SENTENCE_TASKS,
    CorrelationResult,
    PairedDiff,
    auprc,
    auroc_with_ci,
    correlation_with_ci,
    paired_auroc_diff,
    paired_pearson_diff,
    prr,
    sentence_auc_pr,
)
from blackbox_wd.doors.eval.claim_level import claim_lines
from blackbox_wd.doors.eval.data import PASSAGE_LABELS, SENTENCE_LABELS
from blackbox_wd.signals.answers.mathcheck import has_boxed
from blackbox_wd.signals.baselines import ANSWER_PEERS, BASELINES, PEERS
from blackbox_wd.signals.names import PEER_NAMES

METHODS = ("avg_wd", "eigen_wd", "answer_wd", "sentence_wd", "lne", "ls", "es", "er", "dse", *PEERS, *ANSWER_PEERS)
OURS = ("avg_wd", "eigen_wd", "answer_wd", "sentence_wd")
# tabulated only when a result has it (runs before sentence scores or the peers do not; the answer's peers need one)
OPTIONAL = ("sentence_wd", *PEERS, *ANSWER_PEERS)
NAMES = {
    "avg_wd": "AvgWD",
    "eigen_wd": "EigenWD",
    "answer_wd": "AnswerWD",
    "sentence_wd": "SentenceWD",
    "lne": "LNE",
    "ls": "LS",
    "es": "ES",
    "er": "ER",
    "dse": "DSE",
    **PEER_NAMES,
}
SEVERITY = {label: n for n, label in enumerate(SENTENCE_LABELS)}  # metrics' ACCURATE, MINOR, MAJOR
TASK_NAMES = {"nonfact": "NonFact", "nonfact_star": "NonFact*", "factual": "Factual"}
CONTINUOUS_KEYS = PASSAGE_LABELS  # continuous labels, higher = more hallucination: Pearson and Spearman
CONTINUOUS_NAMES = {
    "human_score": "human score of the judged answer (mean of 0 accurate / 0.5 minor / 1 major "
    "inaccurate over its sentences)",
    "unsupported_share": "share of the judged answer's claims labelled unsupported, of those labelled",
}
LABEL_KEYS = ("label", "label_em", "label_first", "label_em_first", "label_judge")
LABEL_NAMES = {
    "label": "ROUGE-L >= 0.5 (QA) / equivalent final answer (MATH) of the judged answer",
    "label_em": "exact match / containment (QA) of the judged answer",
    "label_first": "ROUGE-L >= 0.5 (QA) / equivalent final answer (MATH) of the first sample",
    "label_em_first": "exact match / containment (QA) of the first sample",
    "label_judge": "LLM judge through the API client, of the judged answer",
}
ANSWER_SOURCES = {
    "greedy": "a separate greedy answer (temperature 0)",
    "first": "the first of the K samples",
    "recorded": "the record's recorded response (samples and labels from the data file)",
}
RECORDED_LABEL = "from the data file (1 = the judged answer is hallucinated)"
LNE_SOURCES = {
    "target": "the target's own token log-probs (its API, or llama.cpp drawing it)",
    "teacher": "the teacher's log-probs of the forced samples",
}
STAGES = ("sample", "greedy", "teacher", "transport", "baselines", "dse")


Rows: TypeAlias = Sequence[Mapping[str, Any]]  # result rows (results.jsonl's objects)


@dataclass(frozen=True)
class MethodSummary:
    """One method under one label, on the n prompts with a finite score: AUROC with CI, AUPRC, PRR."""

    auroc: float
    lo: float
    hi: float
    auprc: float
    prr: float
    n: int
    n_pos: int


def get_score(result: Mapping[str, Any], method: str) -> float:
    """The method's score in a result dict (top level, then 'baselines', then 'scores'); NaN if absent."""
    for where in (result, result.get("baselines") or {}, result.get("scores") or {}):
        value = where.get(method)
        if value is not None and not isinstance(value, (dict, list)):
            return float(value)
    return float("nan")


def score_array(results: Rows, method: str) -> np.ndarray:
    """Scores of one method over all results (NaN where missing)."""
    return np.array([get_score(r, method) for r in results], dtype=float)


def finite_scores(results: Rows, methods: Sequence[str]) -> Iterator[tuple[str, np.ndarray]]:
    """Each method with at least one finite score, and its :func:`score_array`."""
    for m in methods:
        s = score_array(results, m)
        if np.isfinite(s).any():
            yield m, s


def shown(results: Rows, methods: Sequence[str]) -> list[str]:
    """The methods to tabulate: all given, an OPTIONAL one only when a result has a finite score of it."""
    return [m for m in methods if m not in OPTIONAL or np.isfinite(score_array(results, m)).any()]


def labelled(results: Rows, key: str) -> list[Mapping[str, Any]]:
    """The results that carry label ``key`` (math items have no ``label_em``; a judge may not answer)."""
    return [r for r in results if r.get(key) is not None]


def label_array(results: Rows, key: str = "label") -> np.ndarray:
    """0/1 labels under ``key``; KeyError when a result lacks it."""
    return np.array([int(r[key]) for r in results], dtype=int)


def summarize(
    results: Rows,
    methods: Sequence[str] = METHODS,
    label_key: str = "label",
    n_boot: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> dict[str, MethodSummary]:
    """AUROC with 95% bootstrap CI, AUPRC and PRR of every method that has at least one finite score."""
    y = label_array(results, label_key)
    out = {}
    for m, s in finite_scores(results, methods):
        a = auroc_with_ci(y, s, n_boot=n_boot, seed=seed)
        out[m] = MethodSummary(a.auroc, a.lo, a.hi, auprc(y, s), prr(y, s), a.n, a.n_pos)
    return out


def best_baseline(table: Mapping[str, MethodSummary]) -> str | None:
    """The baseline or peer with the highest AUROC (None when none has one)."""
    scored = [m for m in (*BASELINES, *PEERS, *ANSWER_PEERS) if m in table and math.isfinite(table[m].auroc)]
    return max(scored, key=lambda m: table[m].auroc, default=None)


def compare(
    results: Rows, method: str, baseline: str, label_key: str = "label", n_boot: int = N_BOOTSTRAP, seed: int = SEED
) -> PairedDiff:
    """AUROC(method) - AUROC(baseline) with its paired bootstrap CI, on the prompts where both are finite."""
    return paired_auroc_diff(
        label_array(results, label_key),
        score_array(results, method),
        score_array(results, baseline),
        n_boot=n_boot,
        seed=seed,
    )


def _fmt(x: float | None, signed: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}% ({part} of {whole})" if whole else "—"


def _table(table: Mapping[str, MethodSummary], methods: Sequence[str]) -> list[str]:
    lines = ["| method | AUROC [95% CI] | AUPRC | PRR | n |", "|---|---|---|---|---|"]
    for m in methods:
        a = table.get(m)
        if a is None:
            lines.append(f"| {NAMES.get(m, m)} | — | — | — | 0 |")
            continue
        lines.append(
            f"| {NAMES.get(m, m)} | {_fmt(a.auroc)} [{_fmt(a.lo)}, {_fmt(a.hi)}] | {_fmt(a.auprc)} | "
            f"{_fmt(a.prr)} | {a.n} |"
        )
    return lines


def _comparisons(results: Rows, table: Mapping[str, MethodSummary], key: str, n_boot: int, seed: int) -> list[str]:
    base = best_baseline(table)
    ours = [m for m in OURS if m in table]
    if base is None or not ours:
        return []
    lines = [
        f"Paired difference to the best baseline, {NAMES[base]} (AUROC {_fmt(table[base].auroc)}; same "
        "resamples for both methods):",
        "",
        "| method | AUROC - AUROC(baseline) [95% CI] | n | verdict |",
        "|---|---|---|---|",
    ]
    for m in ours:
        d = compare(results, m, base, key, n_boot, seed)
        verdict = f"**{d.verdict}**" if d.verdict in ("better", "worse") else d.verdict
        lines.append(
            f"| {NAMES[m]} | {_fmt(d.diff, True)} [{_fmt(d.lo, True)}, {_fmt(d.hi, True)}] | {d.n} | {verdict} |"
        )
    return lines + [""]


def correlations(
    results: Rows,
    methods: Sequence[str] = METHODS,
    key: str = "human_score",
    n_boot: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> dict[str, tuple[CorrelationResult, CorrelationResult]]:
    """(Pearson, Spearman) with bootstrap CIs of every method that has a finite score, against label ``key``."""
    y = np.array([float(r[key]) for r in results], dtype=float)
    out: dict[str, tuple[CorrelationResult, CorrelationResult]] = {}
    for m, s in finite_scores(results, methods):
        out[m] = (
            correlation_with_ci(y, s, "pearson", n_boot, seed),
            correlation_with_ci(y, s, "spearman", n_boot, seed),
        )
    return out


def _correlation_table(
    table: Mapping[str, tuple[CorrelationResult, CorrelationResult]], methods: Sequence[str]
) -> list[str]:
    lines = ["| method | Pearson x100 [95% CI] | Spearman x100 [95% CI] | n |", "|---|---|---|---|"]
    for m in methods:
        if m not in table:
            lines.append(f"| {NAMES.get(m, m)} | — | — | 0 |")
            continue
        cells = [
            f"{100 * c.r:.2f} [{100 * c.lo:.2f}, {100 * c.hi:.2f}]" if math.isfinite(c.r) else "—" for c in table[m]
        ]
        lines.append(f"| {NAMES.get(m, m)} | {cells[0]} | {cells[1]} | {table[m][0].n} |")
    return lines


def _counts(results: Rows, key: str) -> str:
    """'a (n), b (m)' of a row field's values, most common first."""
    found = Counter(str(r[key]) for r in results if r.get(key) is not None)
    return ", ".join(f"{v} ({n})" for v, n in found.most_common()) or "—"


def sentence_arrays(results: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Severity, score (NaN: none) and result index of every sentence with a label; ValueError naming a
    result whose scored ``sentences`` and ``sentence_labels`` differ in number."""
    severity: list[int] = []
    scores: list[float] = []
    passage: list[int] = []
    for n, r in enumerate(results):
        labels = r.get("sentence_labels") or []
        scored = r.get("sentences")
        if scored is not None and len(scored) != len(labels):
            raise ValueError(
                f"result {r.get('id', n)}: {len(scored)} scored 'sentences' for {len(labels)} 'sentence_labels'"
            )
        severity += [SEVERITY[label] for label in labels]
        scores += [np.nan if s["score"] is None else s["score"] for s in scored] if scored else [np.nan] * len(labels)
        passage += [n] * len(labels)
    return np.array(severity, dtype=int), np.array(scores, dtype=float), np.array(passage, dtype=int)


def sentence_lines(results: Rows, n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> list[str]:
    """summary.md's sentence-level section (SelfCheckGPT's AUC-PR); none when no result has sentence labels."""
    rows = labelled(results, "sentence_labels")
    if not rows:
        return []
    arrays = sentence_arrays(rows)
    level = sentence_auc_pr(*arrays, n_boot=n_boot, seed=seed)
    tasks = [getattr(level, task) for task in SENTENCE_TASKS]

    def x100(x: float) -> str:
        return f"{100 * x:.2f}" if math.isfinite(x) else "—"

    def row(name: str, cells: Sequence[str]) -> str:
        return f"| {name} | {' | '.join(cells)} |"

    return [
        "## Sentence level",
        "",
        f"{arrays[0].size} labelled sentences of {len(rows)} judged answers (`sentence_labels`), each scored by "
        "bbwd's sentence score (higher = more likely unsupported). AUC-PR x100 as SelfCheckGPT computes it "
        "(sklearn `auc(recall, precision)` of `precision_recall_curve`). NonFact: positive = minor or major "
        "inaccurate. NonFact*: positive = major inaccurate, over the passages that are not wholly major. "
        "Factual: positive = accurate, ranked by the negated score. Random: the positive share of the sentences "
        f"scored. 95% percentile bootstrap CI over passages, {n_boot} resamples, seed {seed}. Precision-recall "
        "curves: [sentence_pr.png](sentence_pr.png).",
        "",
        "| | " + " | ".join(TASK_NAMES[task] for task in SENTENCE_TASKS) + " |",
        "|---|---|---|---|",
        row(
            "bbwd sentence score: AUC-PR x100 [95% CI]",
            [f"{x100(a.auc_pr)} [{x100(a.lo)}, {x100(a.hi)}]" if math.isfinite(a.auc_pr) else "—" for a in tasks],
        ),
        row("random (positive share) x100", [x100(a.random) for a in tasks]),
        row("sentences scored (passages)", [f"{a.n} ({a.n_passages})" for a in tasks]),
        row("sentences without a score, left out", [str(a.n_unscored) for a in tasks]),
        "",
    ]


def timing_lines(results: Rows) -> list[str]:
    """Median seconds per stage and per prompt, and DSE's median share of a prompt's time."""
    timed = [r["timings"] for r in results if r.get("timings")]
    if not timed:
        return []
    medians = [
        f"{stage} {np.median([t[stage] for t in timed if stage in t]):.2f}"
        for stage in STAGES
        if any(stage in t for t in timed)
    ]
    totals = np.array([sum(t.get(stage, 0.0) for stage in STAGES) for t in timed])  # seconds only
    lines = [f"- time per prompt (median s): {', '.join(medians)}; total {np.median(totals):.2f}"]
    cached = sum(t.get("teacher_cached", 0) for t in timed)
    if cached:
        lines.append(
            f"- teacher states read from the state cache (not forced in this run): {cached} responses of "
            f"{sum(len(r.get('token_counts') or []) + (r.get('answer_wd') is not None) for r in results)}; "
            "the teacher times above count only what was forced"
        )
    share = [t["dse"] / total for t, total in zip(timed, totals, strict=True) if "dse" in t and total > 0]
    if share:
        lines.append(
            f"- DSE share of a prompt's time: median {100 * np.median(share):.2f}%, max {100 * max(share):.2f}%"
        )
    return lines


def truncation_lines(results: Rows, kind: str = "math") -> list[str]:
    """How many of ``kind``'s samples and judged answers were cut at max tokens, and (MATH) lack a \\boxed{}."""
    rows = [r for r in results if r.get("kind") == kind and any(f is not None for f in r.get("finish_reasons") or [])]
    if not rows:
        return []
    cut = sum(f == "length" for r in rows for f in r["finish_reasons"])
    n = sum(len(r["finish_reasons"]) for r in rows)
    answers = [r for r in rows if r.get("answer") is not None]
    line = f"- {kind.upper()} ({len(rows)} prompts): samples cut off at max tokens {_pct(cut, n)}"
    if kind == "math":
        unboxed = sum(not has_boxed(text) for r in rows for text in r.get("responses", []))
        line += f", without \\boxed{{}} {_pct(unboxed, n)}"
    if answers:
        cut = sum(r.get("answer_finish_reason") == "length" for r in answers)
        line += f"; judged answers cut off {_pct(cut, len(answers))}"
        if kind == "math":
            line += f", without \\boxed{{}} {_pct(sum(not has_boxed(r['answer']) for r in answers), len(answers))}"
    return [line]


def stop_of(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The stage where ``-k auto`` stopped a row (its first settled one), None for a row without stages."""
    return next((s for s in row.get("stages") or [] if s["settled"]), None)


def adaptive_lines(results: Rows, n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> list[str]:
    """``-k auto`` replayed over the samples drawn (rows with ``stages``): samples drawn, the adaptive verdict beside
    the fixed-K one (AUROC on ``label``, Pearson on a passage label, paired bootstrap CIs) and the target tokens
    saved (the samples' tokens by the teacher's tokenizer beyond the stop)."""
    rows = [r for r in results if r.get("stages")]
    if not rows:
        return []
    k_max = max(len(r["token_counts"]) for r in rows)
    stops = [stop_of(r) for r in rows]
    drawn = np.array([s["k"] for s in stops if s is not None])
    counts = Counter(int(k) for k in drawn)
    saved = sum(sum(r["token_counts"][s["k"] :]) for r, s in zip(rows, stops, strict=True) if s is not None)
    total = sum(sum(r["token_counts"]) for r in rows)
    lines = [
        "## Adaptive K (`-k auto`), replayed over the samples drawn",
        "",
        f"- samples drawn: mean {drawn.mean():.2f} of {k_max}; prompts stopped at each stage: "
        + ", ".join(f"{k}: {counts[k]}" for k in sorted(counts)),
        f"- target tokens saved: {100 * saved / max(total, 1):.1f}% (the samples' tokens, by the teacher's "
        "tokenizer, that the rule did not draw)",
    ]
    verdicts = [(r, s) for r, s in zip(rows, stops, strict=True) if s is not None and s["p_hallucination"] is not None]
    if not verdicts:
        return lines + ["- no verdict (no calibration with stages): every prompt drew K", ""]
    adaptive = np.array([s["p_hallucination"] for _, s in verdicts], dtype=float)
    fixed = np.array([r["stages"][-1]["p_hallucination"] for r, _ in verdicts], dtype=float)
    lines.append(f"- flags that differ from the fixed-K verdict: {sum(s['flag'] != r['flag'] for r, s in verdicts)}")
    labelled_rows = [(n, r) for n, (r, _) in enumerate(verdicts) if r.get("label") is not None]
    if labelled_rows:
        idx = [n for n, _ in labelled_rows]
        y = np.array([r["label"] for _, r in labelled_rows], dtype=float)
        a, b = auroc_with_ci(y, adaptive[idx], n_boot, seed), auroc_with_ci(y, fixed[idx], n_boot, seed)
        d = paired_auroc_diff(y, adaptive[idx], fixed[idx], n_boot, seed)
        lines.append(
            f"- AUROC (`label`): adaptive {a.auroc:.3f} [{a.lo:.3f}, {a.hi:.3f}], fixed K {b.auroc:.3f} "
            f"[{b.lo:.3f}, {b.hi:.3f}], difference {d.diff:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] (paired)"
        )
    for key in CONTINUOUS_KEYS:
        scored = [(n, r) for n, (r, _) in enumerate(verdicts) if r.get(key) is not None]
        if not scored:
            continue
        idx = [n for n, _ in scored]
        h = np.array([r[key] for _, r in scored], dtype=float)
        a2, b2 = (
            correlation_with_ci(h, adaptive[idx], "pearson", n_boot, seed),
            correlation_with_ci(h, fixed[idx], "pearson", n_boot, seed),
        )
        d2 = paired_pearson_diff(h, adaptive[idx], fixed[idx], n_boot, seed)
        lines.append(
            f"- Pearson x100 (`{key}`): adaptive {100 * a2.r:.2f} [{100 * a2.lo:.2f}, {100 * a2.hi:.2f}], "
            f"fixed K {100 * b2.r:.2f} [{100 * b2.lo:.2f}, {100 * b2.hi:.2f}], difference {100 * d2[0]:+.2f} "
            f"[{100 * d2[1]:+.2f}, {100 * d2[2]:+.2f}] (paired)"
        )
    return lines + [""]


def write_summary(
    results: Rows,
    path: Path,
    methods: Sequence[str] = METHODS,
    label_keys: Sequence[str] = LABEL_KEYS,
    settings: Mapping[str, Any] | None = None,
    title: str = "Hallucination detection",
    n_boot: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> dict[str, dict[str, MethodSummary]]:
    """Write summary.md; return {label_key: {method: MethodSummary}}."""
    methods = shown(results, methods)
    sources = {r["label_from"] for r in results if r.get("label_from") is not None}
    lines = [
        f"# {title}",
        "",
        f"- prompts: {len(results)}",
        f"- prompt protocol: {_counts(results, 'protocol')}",
        "- judged answer (labels without `_first`): "
        + (", ".join(ANSWER_SOURCES.get(s, s) for s in sorted(sources)) or "—"),
        f"- DSE judge: {_counts(results, 'dse_judge')}",
        "- LNE from: "
        + (
            ", ".join(
                f"{LNE_SOURCES.get(v, v)} ({n})"
                for v, n in Counter(r["lne_source"] for r in results if r.get("lne_source")).most_common()
            )
            or "not run"
        ),
        *timing_lines(results),
        *[line for kind in ("qa", "math") for line in truncation_lines(results, kind)],
        f"- AUROC: higher score = more likely hallucination; 95% percentile bootstrap CI, {n_boot} resamples, "
        f"seed {seed}. AUPRC: hallucination is the positive class (chance = base rate). PRR: prediction-"
        "rejection ratio (LM-Polygraph; 1 = oracle, 0 = random).",
        "- A method is better or worse than the best baseline only when the paired bootstrap CI of the AUROC "
        "difference excludes 0; nothing else is bold.",
        "",
    ]
    tables: dict[str, dict[str, MethodSummary]] = {}
    for key in label_keys:
        rows = labelled(results, key)
        if not rows:
            continue
        y = label_array(rows, key)
        tables[key] = summarize(rows, methods, key, n_boot, seed)
        name = RECORDED_LABEL if rows[0].get("label_from") == "recorded" else LABEL_NAMES.get(key, key)
        lines += [
            f"## Label `{key}`: {name}",
            "",
            f"Hallucination base rate: {y.mean():.3f} ({int(y.sum())} hallucinated, {int(y.size - y.sum())} "
            f"correct, n = {y.size})",
            "",
        ]
        if y.min() == y.max():
            lines += ["One class only: AUROC, AUPRC and PRR are undefined under this label.", ""]
            continue
        lines += _table(tables[key], methods) + [""]
        lines += _comparisons(rows, tables[key], key, n_boot, seed)
    for key in CONTINUOUS_KEYS:
        rows = labelled(results, key)
        if rows:
            lines += [
                f"## Label `{key}` (continuous): {CONTINUOUS_NAMES.get(key, key)}",
                "",
                f"Mean {np.mean([r[key] for r in rows]):.3f}, n = {len(rows)}. Pearson's r and Spearman's rho "
                f"of each score with it (a higher score should mean more hallucination); 95% percentile "
                f"bootstrap CI over prompts, {n_boot} resamples, seed {seed}.",
                "",
            ]
            lines += _correlation_table(correlations(rows, methods, key, n_boot, seed), methods) + [""]
    lines += sentence_lines(results, n_boot, seed)
    lines += claim_lines(results, n_boot, seed)
    lines += adaptive_lines(results, n_boot, seed)
    if settings is None and results:
        settings = results[0].get("settings")
    if settings:
        lines += ["## Settings", ""]
        lines += [f"- {k}: `{json.dumps(v, default=str)}`" for k, v in settings.items()]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return tables
