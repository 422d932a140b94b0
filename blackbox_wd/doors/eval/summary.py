"""``bbwd eval``'s ``summary.md`` from per-prompt results (its figures: ``eval.outputs``); the numbers are
``calibration.evaluation``'s, this module writes them out.

A per-prompt result is a dict (a row of ``eval.run``, or ``detector.Result.to_dict()`` plus labels)
holding:

* labels, 1 = hallucination, 0 = correct (``evaluation.labels``): ``label`` (primary), optionally
  ``label_em``, ``label_first``, ``label_em_first``, ``label_judge``;
* the score of every method (``evaluation.methods.get_score``) for m in avg_wd, eigen_wd, answer_wd, sentence_wd,
  lne, ls, es, er, dse (missing/None -> NaN, and that prompt is left out of that method's metrics; SentenceWD is
  shown only when a result has it);
* ``D``: the K x K distance matrix (nested lists or an array), for the heat maps;
* optionally ``id``, ``settings``, ``kind``, ``protocol``, ``label_from``, ``dse_judge``,
  ``timings`` (seconds per stage), ``responses``, ``finish_reasons``, ``answer`` and
  ``answer_finish_reason`` (for the truncation rates);
* optionally ``sentence_labels`` with ``sentences`` (``evaluation.sentences``), for the sentence-level section
  (SelfCheckGPT's AUC-PR) and ``sentence_pr.png``.

Per label, summary.md gives the base rate and the prompts per class, then per method AUROC with its
95% bootstrap CI, AUPRC and PRR (``evaluation.methods``), and for AvgWD and EigenWD the paired bootstrap
CI of the AUROC difference to the best baseline (the baseline with the highest AUROC) with its
verdict. Only a verdict the CI supports (better / worse) is bold; nothing is bolded for being the
largest point estimate.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from blackbox_wd.calibration.evaluation.labels import (
    CONTINUOUS_KEYS,
    CONTINUOUS_NAMES,
    LABEL_KEYS,
    LABEL_NAMES,
    RECORDED_LABEL,
    TASK_NAMES,
    Rows,
    label_array,
    rows_with,
)
from blackbox_wd.calibration.evaluation.methods import (
    METHODS,
    OURS,
    MethodSummary,
    best_baseline,
    compare,
    correlations,
    method_table,
    shown,
)
from blackbox_wd.calibration.evaluation.metrics import N_BOOTSTRAP, SEED, SENTENCE_TASKS, CorrelationResult
from blackbox_wd.calibration.evaluation.replay import replay
from blackbox_wd.calibration.evaluation.sentences import sentence_level
from blackbox_wd.calibration.members import MEMBER_NAMES
from blackbox_wd.doors.eval.claim_level import claim_lines
from blackbox_wd.signals.answers.mathcheck import has_boxed

ANSWER_SOURCES = {
    "greedy": "a separate greedy answer (temperature 0)",
    "first": "the first of the K samples",
    "recorded": "the record's recorded response (samples and labels from the data file)",
}
LNE_SOURCES = {
    "target": "the target's own token log-probs (its API, or llama.cpp drawing it)",
    "teacher": "the teacher's log-probs of the forced samples",
}
TIMED_STAGES = ("sample", "greedy", "teacher", "transport", "baselines", "dse")  # the seconds in a row's ``timings``


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
            lines.append(f"| {MEMBER_NAMES.get(m, m)} | — | — | — | 0 |")
            continue
        lines.append(
            f"| {MEMBER_NAMES.get(m, m)} | {_fmt(a.auroc)} [{_fmt(a.lo)}, {_fmt(a.hi)}] | {_fmt(a.auprc)} | "
            f"{_fmt(a.prr)} | {a.n} |"
        )
    return lines


def _comparisons(results: Rows, table: Mapping[str, MethodSummary], key: str, n_boot: int, seed: int) -> list[str]:
    base = best_baseline(table)
    ours = [m for m in OURS if m in table]
    if base is None or not ours:
        return []
    lines = [
        f"Paired difference to the best baseline, {MEMBER_NAMES[base]} (AUROC {_fmt(table[base].auroc)}; same "
        "resamples for both methods):",
        "",
        "| method | AUROC - AUROC(baseline) [95% CI] | n | verdict |",
        "|---|---|---|---|",
    ]
    for m in ours:
        d = compare(results, m, base, key, n_boot, seed)
        verdict = f"**{d.verdict}**" if d.verdict in ("better", "worse") else d.verdict
        lines.append(
            f"| {MEMBER_NAMES[m]} | {_fmt(d.diff, True)} [{_fmt(d.lo, True)}, {_fmt(d.hi, True)}] | {d.n} | {verdict} |"
        )
    return lines + [""]


def _correlation_table(
    table: Mapping[str, tuple[CorrelationResult, CorrelationResult]], methods: Sequence[str]
) -> list[str]:
    lines = ["| method | Pearson x100 [95% CI] | Spearman x100 [95% CI] | n |", "|---|---|---|---|"]
    for m in methods:
        if m not in table:
            lines.append(f"| {MEMBER_NAMES.get(m, m)} | — | — | 0 |")
            continue
        cells = [
            f"{100 * c.r:.2f} [{100 * c.lo:.2f}, {100 * c.hi:.2f}]" if math.isfinite(c.r) else "—" for c in table[m]
        ]
        lines.append(f"| {MEMBER_NAMES.get(m, m)} | {cells[0]} | {cells[1]} | {table[m][0].n} |")
    return lines


def _counts(results: Rows, key: str) -> str:
    """'a (n), b (m)' of a row field's values, most common first."""
    found = Counter(str(r[key]) for r in results if r.get(key) is not None)
    return ", ".join(f"{v} ({n})" for v, n in found.most_common()) or "—"


def sentence_lines(results: Rows, n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> list[str]:
    """summary.md's sentence-level section (SelfCheckGPT's AUC-PR); none when no result has sentence labels."""
    level = sentence_level(results, n_boot, seed)
    if level is None:
        return []
    tasks = [getattr(level.auc_pr, task) for task in SENTENCE_TASKS]

    def x100(x: float) -> str:
        return f"{100 * x:.2f}" if math.isfinite(x) else "—"

    def row(name: str, cells: Sequence[str]) -> str:
        return f"| {name} | {' | '.join(cells)} |"

    return [
        "## Sentence level",
        "",
        f"{level.sentences} labelled sentences of {level.answers} judged answers (`sentence_labels`), each scored by "
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
        for stage in TIMED_STAGES
        if any(stage in t for t in timed)
    ]
    totals = np.array([sum(t.get(stage, 0.0) for stage in TIMED_STAGES) for t in timed])  # seconds only
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


def adaptive_lines(results: Rows, n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> list[str]:
    """summary.md's ``-k auto`` section (``evaluation.replay``): samples drawn, the adaptive verdict beside the
    fixed-K one and the target tokens saved; none when no row has stages."""
    r = replay(results, n_boot, seed)
    if r is None:
        return []
    lines = [
        "## Adaptive K (`-k auto`), replayed over the samples drawn",
        "",
        f"- samples drawn: mean {r.mean_drawn:.2f} of {r.k_max}; prompts stopped at each stage: "
        + ", ".join(f"{k}: {n}" for k, n in r.stopped.items()),
        f"- target tokens saved: {100 * r.saved / max(r.tokens, 1):.1f}% (the samples' tokens, by the teacher's "
        "tokenizer, that the rule did not draw)",
    ]
    if r.flags_differ is None:
        return lines + ["- no verdict (no calibration with stages): every prompt drew K", ""]
    lines.append(f"- flags that differ from the fixed-K verdict: {r.flags_differ}")
    if r.auroc is not None:
        a, b, d = r.auroc
        lines.append(
            f"- AUROC (`label`): adaptive {a.auroc:.3f} [{a.lo:.3f}, {a.hi:.3f}], fixed K {b.auroc:.3f} "
            f"[{b.lo:.3f}, {b.hi:.3f}], difference {d.diff:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] (paired)"
        )
    for c in r.pearson:
        a2, b2, d2 = c.adaptive, c.fixed, c.difference
        lines.append(
            f"- Pearson x100 (`{c.key}`): adaptive {100 * a2.r:.2f} [{100 * a2.lo:.2f}, {100 * a2.hi:.2f}], "
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
        rows = rows_with(results, key)
        if not rows:
            continue
        y = label_array(rows, key)
        tables[key] = method_table(rows, methods, key, n_boot, seed)
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
        rows = rows_with(results, key)
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
