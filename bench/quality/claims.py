"""Claim scores (#47): each claim-support member, the fitted heads and the anchors on the four gbu sets.

Each record's K = 10 recorded samples, its judged answer and each of the answer's claims are forced through the
embedded teacher (SmolLM2-135M, fp32 on the CPU) as responses to the record's prompt, in one pass per few records;
their states are kept under ``--cache`` (one ``.npz`` a record, keyed by the texts and the teacher), so a rerun
forces nothing. Then, per set, on the claims labelled supported or unsupported (``other`` is scored, not counted):

- **members** (``blackbox_wd.claims.MEMBERS``): AUROC of unsupported vs supported with a 95% percentile bootstrap
  CI over answers (an answer's claims go together; 1000 resamples, seed 0);
- **heads** (``calibration.combine.fit_linear``): ``mean`` / ``logistic`` / ``select`` over all members, ``logistic``
  over the OT members and over the lexical ones; 5-fold ``StratifiedGroupKFold`` by answer, AUROC of the pooled
  out-of-fold scores, mean over the fold seeds (min and max beside);
- **the claim verdict**: the head or member with the highest mean over the sets (bench/RESULTS.md, "Claim scores
  (#47)"), and **leave one set out**: for each set, the head best on the other three, fitted on their claims;
- **rule 2** (written after popqa gpt-3.5 was seen): the one head ``mean(avg_wd, lex_share)``, the answer's AvgWD
  (``scores.avg_wd`` of its samples' D, given to each of its claims) with the claim's ``lex_share``, measured as the
  heads are, popqa gpt-3.5 marked as its development set;
- **anchors**: the issue's figures, and the AUROC recomputed from the file's ``claim_scores`` where present (the
  authors' scores are confidences: negated);
- **cost** (``--cost N``): per record, the members after the teacher pass (``claims.claim_members``) against
  ``scoring.score_states`` on the same states (samples and judged answer, the shipped API calibration), the median
  over the first N records of popqa gpt-3.5 and factscore llama-3-70b of each record's ratio (each time the median of
  5 rounds, alternating order); and the claims' share of the teacher pass's tokens.

    python -m bench.quality.claims                      # the four sets, 5 fold seeds, cost on 20 + 20 records
    python -m bench.quality.claims --quick              # smoke run: 6 answers of two sets, 2 seeds, cost on 2 records
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import table
from blackbox_wd.calibration.combine import decision, fit_linear, group_folds  # noqa: E402
from blackbox_wd.doors.eval.data import data_dir  # noqa: E402
from blackbox_wd.records import Messages, Sample, SampleSet, TokenStates, as_messages  # noqa: E402
from blackbox_wd.signals.claims import MEMBERS, claim_members, score_claims  # noqa: E402

SETS = ("popqa_gpt35", "factscore_gpt35", "factscore_llama3_70b", "popqa_llama3_70b")  # the issue's column order
ISSUE_ANCHORS = {  # AUROC on the judged answer's claims (data README): VC with options, SelfCheck-Unigram(max)
    "vc_options": (0.630, 0.729, 0.678, 0.661),
    "unigram_max": (0.631, 0.648, 0.598, 0.567),
}
SC_BAR = 0.746  # self-consistency on popqa gpt-3.5: the verdict's bar there
FILE_ANCHORS = {  # the file's claim_scores key -> the name shown (each a confidence: negated)
    "sc_score_4samples": "SC (file)",
    "breakdown_closeness_centrality_4samples": "C_C (file)",
    "breakdown_closeness_centrality_with_node_confidence_4samples": "C_C + VC (file)",
    "verbalized_confidence_with_options": "VC with options (file)",
}
OT = ("ot_nearest", "ot_partial", "ot_gap")
LEXICAL = ("lex_absent", "lex_rarest", "lex_share", "unigram")
HEADS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mean(all)": ("mean", MEMBERS),
    "logistic(all)": ("logistic", MEMBERS),
    "select(all)": ("select", MEMBERS),
    "logistic(OT)": ("logistic", OT),
    "logistic(lexical)": ("logistic", LEXICAL),
}
RULE2: dict[str, tuple[str, tuple[str, ...]]] = {"mean(avg_wd,lex_share)": ("mean", ("avg_wd", "lex_share"))}
DEV2 = "popqa_gpt35"  # the set rule 2 was picked on
N_BOOT = 1000


# ---------------------------------------------------------------- the teacher pass, kept on disk


@dataclass
class Forced:
    """One record's states: samples (with their unprojected last states), judged answer, claims; and the pass."""

    samples: list[TokenStates]
    answer: TokenStates
    claims: list[np.ndarray]
    offsets: np.ndarray  # (a, 2) character spans of the judged answer's tokens
    seconds: float  # the record's share of the pass, by tokens
    claim_share: float  # the claims' share of the record's forced tokens


def record_key(record: dict[str, Any], teacher: Any) -> str:
    """sha256 of what the states depend on: the teacher's name, layer and projection, and the texts."""
    parts = [teacher.name, teacher.layer, teacher.proj_dim, teacher.proj_seed, record["prompt"], record["response"]]
    parts += [*record["samples"], *(c["text"] for c in record["claims"])]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def save(path: Path, key: str, f: Forced) -> None:
    """One record's states as an ``.npz`` (no pickles)."""
    arrays: dict[str, np.ndarray] = {"key": np.array(key), "offsets": f.offsets}
    arrays["meta"] = np.array([f.seconds, f.claim_share])
    arrays["answer"], arrays["answer_last"] = f.answer.states, f.answer.last
    for k, s in enumerate(f.samples):
        arrays[f"sample{k}"], arrays[f"last{k}"] = s.states, s.last
    for i, c in enumerate(f.claims):
        arrays[f"claim{i}"] = c
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)


def load(path: Path, key: str, k: int, n: int) -> Forced | None:
    """The record's states when the file holds them for this key, else None."""
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        if str(z["key"]) != key:
            return None
        samples = [TokenStates(z[f"sample{j}"], z[f"last{j}"]) for j in range(k)]
        seconds, share = z["meta"].tolist()
        return Forced(
            samples,
            TokenStates(z["answer"], z["answer_last"]),
            [z[f"claim{i}"] for i in range(n)],
            z["offsets"],
            seconds,
            share,
        )


def force(teacher: Any, records: list[dict[str, Any]]) -> list[Forced]:
    """One shared-prefix pass over the records' samples, judged answers and claims."""
    pairs, spans = [], []
    for r in records:
        prompt = teacher.prompt_ids(as_messages(r["prompt"]))
        texts = [*r["samples"], r["response"], *(c["text"] for c in r["claims"])]
        spans.append(slice(len(pairs), len(pairs) + len(texts)))
        pairs.extend((prompt, teacher.response_ids(t)) for t in texts)
    t0 = time.perf_counter()
    states = teacher.encode_ids(pairs)
    seconds = time.perf_counter() - t0
    total = sum(len(p) + len(q) for p, q in pairs)
    out = []
    for r, span in zip(records, spans, strict=True):
        got, k = states[span], len(r["samples"])
        tokens = [len(p) + len(q) for p, q in pairs[span]]
        claim_tokens = sum(len(q) for _, q in pairs[span][k + 1 :])
        offsets = teacher.reader.text_offsets(r["response"], pairs[span][k][1])
        out.append(
            Forced(
                got[:k],
                got[k],
                [ts.states for ts in got[k + 1 :]],
                offsets,
                seconds * sum(tokens) / total,
                claim_tokens / sum(len(q) for _, q in pairs[span]),
            )
        )
    return out


def forced_records(
    teacher: Any, name: str, records: list[dict[str, Any]], cache: Path, log: bool, reverse: bool = False
) -> list[Forced]:
    """Every record's states, from the cache where they are, forced (a few records a pass, from the last one with
    ``reverse``) where not."""
    folder = cache / name
    folder.mkdir(parents=True, exist_ok=True)
    out: list[Forced | None] = []
    todo = []
    for n, r in enumerate(records):
        key = record_key(r, teacher)
        got = load(folder / f"{n}.npz", key, len(r["samples"]), len(r["claims"]))
        out.append(got)
        if got is None:
            todo.append((n, key))
    if reverse:
        todo.reverse()
    t0, done = time.perf_counter(), 0
    for at in range(0, len(todo), 4):
        chunk = []
        for n, key in todo[at : at + 4]:  # another process (``--reverse``) may have forced some meanwhile
            got = load(folder / f"{n}.npz", key, len(records[n]["samples"]), len(records[n]["claims"]))
            if got is None:
                chunk.append((n, key))
            out[n] = got
        if chunk:
            for (n, key), f in zip(chunk, force(teacher, [records[n] for n, _ in chunk]), strict=True):
                save(folder / f"{n}.npz", key, f)
                out[n] = f
        done += len(chunk)
        if log:
            print(f"  {name}: forced {done}/{len(todo)} records, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return [f for f in out if f is not None]


# ---------------------------------------------------------------- members and metrics


@dataclass
class Claims:
    """One set's labelled claims: members, label (1 unsupported), answer of each, the file's anchors."""

    members: dict[str, np.ndarray]
    y: np.ndarray
    groups: np.ndarray
    anchors: dict[str, np.ndarray]


def set_claims(records: list[dict[str, Any]], forced: list[Forced]) -> Claims:
    """Each record's members and AvgWD, kept for its supported and unsupported claims."""
    from blackbox_wd.measure.transport import pairwise_w2
    from blackbox_wd.measure.wd import avg_wd

    cols: dict[str, list[float]] = {m: [] for m in (*MEMBERS, "avg_wd")}
    anchors: dict[str, list[float]] = {name: [] for name in FILE_ANCHORS.values()}
    y, groups = [], []
    for n, (r, f) in enumerate(zip(records, forced, strict=True)):
        values = claim_members(
            f.claims,
            [s.states for s in f.samples],
            f.answer.states,
            [c["text"] for c in r["claims"]],
            r["samples"],
            r["response"],
            r["prompt"],
        )
        values["avg_wd"] = np.full(len(r["claims"]), avg_wd(pairwise_w2([s.states for s in f.samples])))
        scores = r.get("claim_scores") or {}
        for i, c in enumerate(r["claims"]):
            if c["label"] == "other":
                continue
            y.append(int(c["label"] == "unsupported"))
            groups.append(n)
            for m in cols:
                cols[m].append(float(values[m][i]))
            for key, name in FILE_ANCHORS.items():
                v = scores.get(key, [None] * len(r["claims"]))[i]
                anchors[name].append(np.nan if v is None else -float(v))
    kept = {name: np.array(v) for name, v in anchors.items() if np.isfinite(v).any()}
    return Claims({m: np.array(v) for m, v in cols.items()}, np.array(y), np.array(groups), kept)


def auroc(y: np.ndarray, s: np.ndarray) -> float:
    """AUROC (ties one half) on the finite scores."""
    from sklearn.metrics import roc_auc_score

    keep = np.isfinite(s)
    return float(roc_auc_score(y[keep], s[keep]))


def weighted_auroc(y: np.ndarray, level: np.ndarray, n_levels: int, w: np.ndarray) -> float:
    """AUROC with integer multiplicities ``w`` (a bootstrap resample), from each row's score level (ties one half)."""
    pos = np.bincount(level, w * y, n_levels)
    neg = np.bincount(level, w * (1 - y), n_levels)
    below = np.cumsum(neg) - neg
    return float((pos * (below + 0.5 * neg)).sum() / (pos.sum() * neg.sum()))


def grouped_ci(y: np.ndarray, s: np.ndarray, groups: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap CI of the AUROC, answers resampled with replacement (their claims go together)."""
    keep = np.isfinite(s)
    y, s, groups = y[keep], s[keep], groups[keep]
    _, level = np.unique(s, return_inverse=True)
    ids, g = np.unique(groups, return_inverse=True)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(N_BOOT):
        w = np.bincount(rng.integers(0, ids.size, ids.size), minlength=ids.size)[g].astype(float)
        if (w * y).sum() > 0 and (w * (1 - y)).sum() > 0:
            values.append(weighted_auroc(y, level, int(level.max()) + 1, w))
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def paired_ci(y: np.ndarray, a: np.ndarray, b: np.ndarray, groups: np.ndarray, seed: int = 0) -> str:
    """AUROC(a) - AUROC(b) on the claims both score, with its 95% CI over the same answer resamples for both."""
    keep = np.isfinite(a) & np.isfinite(b)
    y, a, b, groups = y[keep], a[keep], b[keep], groups[keep]
    (_, la), (_, lb) = np.unique(a, return_inverse=True), np.unique(b, return_inverse=True)
    ids, g = np.unique(groups, return_inverse=True)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(N_BOOT):
        w = np.bincount(rng.integers(0, ids.size, ids.size), minlength=ids.size)[g].astype(float)
        if (w * y).sum() > 0 and (w * (1 - y)).sum() > 0:
            values.append(weighted_auroc(y, la, int(la.max()) + 1, w) - weighted_auroc(y, lb, int(lb.max()) + 1, w))
    lo, hi = np.percentile(values, [2.5, 97.5])
    return f"{auroc(y, a) - auroc(y, b):+.3f} [{lo:+.3f}, {hi:+.3f}]"


def against(c: Claims, z: np.ndarray) -> str:
    """The paired differences of out-of-fold scores z against the file's VC with options, and SC where present."""
    out = [f"VC {paired_ci(c.y, z, c.anchors['VC with options (file)'], c.groups)}"]
    if "SC (file)" in c.anchors:
        out.append(f"SC {paired_ci(c.y, z, c.anchors['SC (file)'], c.groups)}")
    return "; ".join(out)


def matrix(c: Claims, names: Sequence[str]) -> np.ndarray:
    """(n, len(names)) members; a missing value (a claim without a word's unigram) is filled by the column mean."""
    x = np.column_stack([c.members[m] for m in names])
    means = np.nanmean(x, axis=0)
    return np.where(np.isfinite(x), x, means)


def cv_scores(c: Claims, head: str, folds: int, seed: int) -> np.ndarray:
    """Out-of-fold scores of a head (or a member as is) in one set, folds by answer."""
    if head in MEMBERS:
        return c.members[head]
    combiner, names = {**HEADS, **RULE2}[head]
    x, z = matrix(c, names), np.empty(c.y.size)
    for train, test in group_folds(c.y, c.groups, folds, seed):
        params = fit_linear(x[train], c.y[train], np.ones(train.size), combiner, np.zeros(train.size))
        z[test] = decision(params, x[test])
    return z


def loso_scores(sets: dict[str, Claims], held: str, head: str) -> np.ndarray:
    """Scores of a head on the held-out set, fitted on the claims of the other sets (a member: as is)."""
    if head in MEMBERS:
        return sets[held].members[head]
    combiner, names = {**HEADS, **RULE2}[head]
    train = [c for name, c in sets.items() if name != held]
    x = np.vstack([matrix(c, names) for c in train])
    y = np.concatenate([c.y for c in train])
    source = np.concatenate([np.full(c.y.size, name) for name, c in sets.items() if name != held])
    return decision(fit_linear(x, y, np.ones(y.size), combiner, source), matrix(sets[held], names))


def left_out(sets: dict[str, Claims], held: str, head: str) -> tuple[float, float, float]:
    """AUROC and grouped CI of a head on the held-out set, fitted on the others."""
    c = sets[held]
    z = loso_scores(sets, held, head)
    return (auroc(c.y, z), *grouped_ci(c.y, z, c.groups))


def met(n: str, value: float, bar: float) -> str:
    """'met' when the value is above the bar (at or above SC's on popqa gpt-3.5), else 'NOT met'."""
    return "met" if value > bar or (n == "popqa_gpt35" and value >= bar) else "NOT met"


# ---------------------------------------------------------------- cost


def ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall-clock milliseconds of one call and its result."""
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def cost_rows(detector: Any, name: str, records: list[dict[str, Any]], forced: list[Forced], rounds: int) -> list[str]:
    """One table row: the set's medians (ms) and the median over records of (members / score_states)."""
    from blackbox_wd.run.stages import PromptStates, score_states

    after, members, nopartial, ratios, ratios_np, teacher, share = [], [], [], [], [], [], []
    door, ratios_door = [], []
    for r, f in zip(records, forced, strict=True):
        samples = SampleSet([Sample(t) for t in r["samples"]], answer=Sample(r["response"]))
        messages: Messages = as_messages(r["prompt"])
        ps = PromptStates(messages, samples, f.samples, 0, f.seconds, f.answer, None, 0, f.offsets)
        texts = [c["text"] for c in r["claims"]]
        states = [s.states for s in f.samples]

        def run(
            partial: bool, r: dict[str, Any] = r, f: Forced = f, texts: list[str] = texts, states: list = states
        ) -> Any:
            return claim_members(
                f.claims, states, f.answer.states, texts, r["samples"], r["response"], r["prompt"], partial
            )

        wiring = (detector.settings, detector.reported_settings(), detector.calibration, detector.reference_bandwidth)
        jobs: list[Callable[[], Any]] = [
            lambda ps=ps, wiring=wiring: score_states(ps, *wiring),
            lambda: run(True),
            lambda: run(False),
            lambda r=r, texts=texts: score_claims(texts, r["samples"], r["response"], r["prompt"]),
        ]
        times: list[list[float]] = [[] for _ in jobs]
        for k in range(rounds):
            order = range(len(jobs)) if k % 2 == 0 else reversed(range(len(jobs)))
            for j in order:
                times[j].append(ms(jobs[j])[0])
        t_score, t_claims, t_np, t_door = (float(np.median(t)) for t in times)
        door.append(t_door)
        ratios_door.append(t_door / t_score)
        after.append(t_score)
        members.append(t_claims)
        nopartial.append(t_np)
        ratios.append(t_claims / t_score)
        ratios_np.append(t_np / t_score)
        teacher.append(f.seconds * 1e3)
        share.append(f.claim_share)
    return [
        name,
        str(len(records)),
        f"{np.median(teacher):.0f}",
        f"{np.median(share):.1%}",
        f"{np.median(after):.1f}",
        f"{np.median(members):.1f}",
        f"{np.median(ratios):.3f}",
        f"{np.median(nopartial):.1f}",
        f"{np.median(ratios_np):.3f}",
        f"{np.median(door):.2f}",
        f"{np.median(ratios_door):.4f}",
    ]


# ---------------------------------------------------------------- report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="6 answers of two sets, 2 fold seeds, cost on 2 records")
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--limit", type=int, default=None, help="the first N answers of each set")
    ap.add_argument("--seeds", type=int, default=5, help="fold seeds 0 .. N-1")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--cost", type=int, default=20, help="records per set timed (0: no cost table)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/bbwd-claims"), help="where forced states are kept")
    ap.add_argument("--force-only", action="store_true", help="force and cache the states, then stop")
    ap.add_argument("--reverse", action="store_true", help="force from each set's last record (a second process)")
    args = ap.parse_args()
    if args.quick:
        args.sets, args.limit, args.seeds, args.folds, args.cost, args.rounds = SETS[:2], 6, 2, 3, 2, 2
    torch_threads = os.environ.get("OMP_NUM_THREADS", "default")

    from blackbox_wd.teachers.hf import load_teacher

    teacher = load_teacher("smollm2-135m", device="cpu", dtype="float32")
    loaded: dict[str, tuple[list[dict[str, Any]], list[Forced]]] = {}
    for name in args.sets:
        with open(data_dir() / f"gbu_{name}.jsonl", encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh][: args.limit]
        loaded[name] = (records, forced_records(teacher, name, records, args.cache, not args.quick, args.reverse))
    if args.force_only:
        return

    load_avg = os.getloadavg()
    print(
        f"command: python -m bench.quality.claims {' '.join(sys.argv[1:])}   ({platform.machine()}, "
        f"{len(os.sched_getaffinity(0))} CPUs, load {load_avg[0]:.2f}, torch threads {torch_threads}); teacher "
        f"smollm2-135m fp32 CPU, layer {teacher.layer}, 128-d, states as they are; {args.folds} folds by answer, "
        f"fold seeds 0-{args.seeds - 1}\n"
    )
    sets = {name: set_claims(*loaded[name]) for name in args.sets}
    candidates = [*MEMBERS, *HEADS]
    cv: dict[str, dict[str, list[float]]] = {name: {} for name in sets}
    oof0: dict[str, dict[str, np.ndarray]] = {name: {} for name in sets}
    for name, c in sets.items():
        for head in candidates:
            runs = [cv_scores(c, head, args.folds, seed) for seed in range(args.seeds)]
            cv[name][head] = [auroc(c.y, z) for z in runs]
            oof0[name][head] = runs[0]
    mean_over = {h: float(np.mean([np.mean(cv[n][h]) for n in sets])) for h in candidates}
    verdict = max(candidates, key=mean_over.__getitem__)

    cols = list(sets)
    idx = {n: SETS.index(n) for n in cols}
    print("### Each member alone and each head: AUROC, unsupported vs supported (within-set CV for heads)\n")
    counts = ", ".join(f"{n} {c.y.sum()} / {(1 - c.y).sum()}" for n, c in sets.items())
    print(f"claims (unsupported / supported): {counts}\n")
    rows = []
    for head in candidates:
        cells = []
        for n in cols:
            values = cv[n][head]
            if head in MEMBERS:
                lo, hi = grouped_ci(sets[n].y, sets[n].members[head], sets[n].groups)
                cells.append(f"{values[0]:.3f} [{lo:.3f}, {hi:.3f}]")
            else:
                cells.append(f"{np.mean(values):.3f} ({min(values):.3f}-{max(values):.3f})")
        mark = " **(verdict)**" if head == verdict else ""
        rows.append([head + mark, *cells, f"{mean_over[head]:.3f}"])
    print(table(["member or head", *cols, "mean over sets"], rows))

    print("\n### Anchors on the same claims\n")
    rows = []
    for label, values in (
        ("VC with options (issue)", ISSUE_ANCHORS["vc_options"]),
        ("SelfCheck-Unigram(max) (issue)", ISSUE_ANCHORS["unigram_max"]),
    ):
        rows.append([label, *(f"{values[idx[n]]:.3f}" for n in cols)])
    for label in FILE_ANCHORS.values():
        cells = []
        for n in cols:
            c = sets[n]
            if label in c.anchors:
                lo, hi = grouped_ci(c.y, c.anchors[label], c.groups)
                cells.append(f"{auroc(c.y, c.anchors[label]):.3f} [{lo:.3f}, {hi:.3f}]")
            else:
                cells.append("-")
        rows.append([label, *cells])
    rows.append(["SelfCheck-Unigram(max) recomputed (= `unigram`)", *(f"{cv[n]['unigram'][0]:.3f}" for n in cols)])
    print(table(["anchor", *cols], rows))

    print(f"\n### The claim verdict: {verdict} (highest mean over the sets), and leave one set out\n")
    rows = []
    for n in cols:
        c = sets[n]
        lo, hi = grouped_ci(c.y, oof0[n][verdict], c.groups)
        others = [m for m in cols if m != n]
        best = max(candidates, key=lambda h, others=others: float(np.mean([np.mean(cv[m][h]) for m in others or [n]])))
        loso, lo2, hi2 = left_out(sets, n, best) if others else (float("nan"),) * 3
        bar = max(ISSUE_ANCHORS["vc_options"][idx[n]], ISSUE_ANCHORS["unigram_max"][idx[n]])
        if n == "popqa_gpt35":
            bar = max(bar, SC_BAR)
        within = float(np.mean(cv[n][verdict]))
        rows.append(
            [
                n,
                f"{within:.3f}; seed 0 {cv[n][verdict][0]:.3f} [{lo:.3f}, {hi:.3f}]",
                f"{best}: {loso:.3f} [{lo2:.3f}, {hi2:.3f}]",
                f"{bar:.3f}",
                met(n, within, bar),
                met(n, loso, bar),
                against(c, oof0[n][verdict]),
            ]
        )
    header = ["set", "within-set CV AUROC", "leave one set out", "bar", "within", "left out", "seed 0 minus (paired)"]
    print(table(header, rows))

    (head2,) = RULE2
    print(f"\n### Rule 2: {head2} (popqa_gpt35 is its development set)\n")
    rows = []
    for n in cols:
        c = sets[n]
        runs = [auroc(c.y, cv_scores(c, head2, args.folds, seed)) for seed in range(args.seeds)]
        z2 = cv_scores(c, head2, args.folds, 0)
        lo, hi = grouped_ci(c.y, z2, c.groups)
        alone = auroc(c.y, c.members["avg_wd"])
        a_lo, a_hi = grouped_ci(c.y, c.members["avg_wd"], c.groups)
        loso, lo2, hi2 = left_out(sets, n, head2) if len(cols) > 1 else (float("nan"),) * 3
        bar = max(ISSUE_ANCHORS["vc_options"][idx[n]], ISSUE_ANCHORS["unigram_max"][idx[n]])
        rows.append(
            [
                n + (" (dev)" if n == DEV2 else ""),
                f"{alone:.3f} [{a_lo:.3f}, {a_hi:.3f}]",
                f"{np.mean(runs):.3f} ({min(runs):.3f}-{max(runs):.3f}); seed 0 [{lo:.3f}, {hi:.3f}]",
                f"{loso:.3f} [{lo2:.3f}, {hi2:.3f}]",
                f"{bar:.3f}" + (f"; SC {SC_BAR:.3f}" if n == "popqa_gpt35" else ""),
                "dev" if n == DEV2 else met(n, float(np.mean(runs)), bar),
                "dev" if n == DEV2 else met(n, loso, bar),
                against(c, cv_scores(c, head2, args.folds, 0))
                + f"; rule 1 {paired_ci(c.y, z2, oof0[n][verdict], c.groups)}",
            ]
        )
    header = ["set", "avg_wd alone", "within-set CV AUROC", "leave one set out", "bar", "within", "left out"]
    print(table([*header, "seed 0 minus (paired)"], rows))

    if args.cost:
        from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS, Calibration
        from blackbox_wd.clients.sampling import RecordedSamples
        from blackbox_wd.run.detector import Detector
        from blackbox_wd.settings import Settings

        detector = Detector(teacher, RecordedSamples(), Settings(k=10, device="cpu"), device="cpu")
        detector = detector.with_calibration(Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.api.json"))
        print(f"\n### Cost after the teacher pass ({args.rounds} rounds a record, medians)\n")
        rows = []
        for n in ("popqa_gpt35", "factscore_llama3_70b"):
            if n in loaded:
                records, forced = loaded[n]
                rows.append(cost_rows(detector, n, records[: args.cost], forced[: args.cost], args.rounds))
        print(
            table(
                [
                    "set",
                    "records",
                    "teacher pass ms",
                    "claims' share of its tokens",
                    "score_states ms",
                    "claim members ms",
                    "members / score_states",
                    "without ot_partial ms",
                    "without ot_partial / score_states",
                    "the doors' claim score ms",
                    "doors' / score_states",
                ],
                rows,
            )
        )
        print(
            "\ngoal (#47): the claim score the doors compute (`claims.score_claims`, read by the claim head with the "
            "answer's AvgWD) / score_states at most 0.30; the members are the study's"
        )


if __name__ == "__main__":
    main()
