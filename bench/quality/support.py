"""The lead "support" on passages, measured (no fit): how much more likely each sample makes the judged answer.

For a passage's judged answer a and each of its first K samples s_k, the embedded teacher (SmolLM2-135M, the whole
model, CPU) reads the chat [user: prompt, assistant: s_k, user: prompt] and then a as the assistant's turn; token
t's support from s_k is its log-probability there less its log-probability after [user: prompt] alone. The
answer's support is the mean over its tokens of the mean over the samples; a sentence's, the same over its tokens
(mapped by their character offsets). Risk = -support.

Printed per set: the answer's support beside ROUGE-1, SentenceWD, AvgWD and the lexical surprise on the same rows
(Pearson x100 with the passage label), with sentence labels the sentences' NonFact AUC-PR x100 (``metrics.auc_pr``,
the trapezoid) beside their OT score and lexical surprise, and the teacher's time for the support passes against the
layer pass of the same samples.
docs/results-notebook.md, "A seventh look".

    python -m bench.quality.support --runs R10 --sets wikibio_gpt3_dev gbu_factscore_gpt35 [--limit N]

where ``R10/<set>-k10/results.jsonl`` is a ``bbwd eval`` run of the set at K = 10 (its rows give the answer, the
samples and the members), the set's records read from ``../shared/data``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import command, data_dir, table
from bench.verdicts import labelled_rows, with_members
from blackbox_wd.calibration.evaluation.labels import NONFACT
from blackbox_wd.calibration.evaluation.metrics import auc_pr
from blackbox_wd.calibration.members import member_value
from blackbox_wd.doors.eval.data import load
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.forcing import HFTeacher

BESIDE = ("lexsim_rouge1", "sentence_wd", "avg_wd", "answer_unigram")


def support(teacher: HFTeacher, messages: list[dict[str, str]], ids: list[int], samples: list[str]) -> np.ndarray:
    """Each token of the answer (its token ``ids``): the mean over ``samples`` of its log-probability gain when the
    teacher read the sample first (the module's docstring)."""
    pairs = [(teacher.prompt_ids(messages), ids)] + [
        (teacher.prompt_ids([*messages, {"role": "assistant", "content": s}, messages[-1]]), ids) for s in samples
    ]
    lp = [s.logprobs for s in teacher.encode_ids(pairs, logprobs=True)]
    assert all(x is not None for x in lp), "asked for"
    return np.mean([x - lp[0] for x in lp[1:]], axis=0)  # type: ignore[operator]


def sentence_means(offsets: np.ndarray, gain: np.ndarray, sentences: list[dict[str, Any]]) -> list[float]:
    """The mean gain of each sentence's tokens, by the tokens' character ``offsets`` (NaN for a sentence with none)."""
    out = []
    for s in sentences:
        inside = (offsets[:, 0] >= s["start"]) & (offsets[:, 1] <= s["end"]) & (offsets[:, 1] > offsets[:, 0])
        out.append(float(gain[inside].mean()) if inside.any() else float("nan"))
    return out


def pearson(y: np.ndarray, x: np.ndarray) -> float:
    return float(100 * np.corrcoef(y, x)[0, 1])


def measure(teacher: HFTeacher, runs: Path, name: str, k: int, limit: int | None) -> tuple[list[str], str]:
    """One set's row of the answers' table, and its sentences' line (empty without sentence labels)."""
    items = {it.id: it for it in load(data_dir() / f"{name}.jsonl").items}
    rows = [with_members(r, ()) for r in labelled_rows(runs / f"{name}-k{k}" / "results.jsonl")][:limit]
    y: list[float] = []
    risk: list[float] = []
    beside: dict[str, list[float | None]] = {m: [] for m in BESIDE}
    sentences: list[tuple[bool, float, float, float]] = []
    spent = layer = 0.0
    for r in rows:
        messages, samples = items[r["id"]].messages, r["responses"][:k]
        t0 = time.perf_counter()
        ids = teacher.response_ids(r["answer"])
        gain = support(teacher, messages, ids, samples)
        t1 = time.perf_counter()
        prompt = teacher.prompt_ids(messages)
        teacher.encode_ids([(prompt, teacher.response_ids(s)) for s in samples])
        spent, layer = spent + t1 - t0, layer + time.perf_counter() - t1
        y.append(r["y"])
        risk.append(-float(gain.mean()))
        for m in BESIDE:
            beside[m].append(member_value(r, m))
        said, labels = r.get("sentences") or [], r.get("sentence_labels") or []
        means = sentence_means(teacher.reader.text_offsets(r["answer"], ids), gain, said)
        for s, mean, label in zip(said, means, labels, strict=False):
            if label is not None and np.isfinite(mean):
                sentences.append((label in NONFACT, -mean, s["score"], s["unigram"]))
    yy = np.array(y, dtype=float)
    row = [name, str(len(rows)), f"{pearson(yy, np.array(risk)):.2f}"]
    row += [f"{pearson(yy, np.array(beside[m], dtype=float)):.2f}" for m in BESIDE]
    row += [f"{spent / max(layer, 1e-9):.1f}"]
    line = ""
    if sentences:
        s = np.array(sentences, dtype=float)
        ap = [100 * auc_pr(s[:, 0], s[:, i]) for i in (1, 2, 3)]
        line = (
            f"{name}: {len(s)} sentences, NonFact AUC-PR x100: support {ap[0]:.2f}, OT score {ap[1]:.2f}, "
            f"lexical surprise {ap[2]:.2f}"
        )
    return row, line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, required=True)
    ap.add_argument("--sets", nargs="+", default=["wikibio_gpt3_dev"])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--limit", type=int, default=None, help="the first N labelled rows of each set")
    args = ap.parse_args()
    teacher = Detector.from_settings(Settings(k=args.k, device="cpu"), None, recorded=True, all_scores=True).teacher
    assert isinstance(teacher, HFTeacher), "the embedded teacher, loaded"
    measured = [measure(teacher, args.runs, name, args.k, args.limit) for name in args.sets]
    print(f"command: {command()}\n")
    header = ["set", "passages", "support", *BESIDE, "support passes / layer pass (time)"]
    print(table(header, [row for row, _ in measured]))
    for _, line in measured:
        if line:
            print(line)


if __name__ == "__main__":
    main()
