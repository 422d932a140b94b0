"""The evaluation run: score dataset prompts with AvgWD, EigenWD and the baselines, then label them.

Labels come from the first sampled response (the prompt-level label of the paper's protocol):
1 = hallucination (incorrect), 0 = correct; see ``eval.labels``. Results are appended to
``results.jsonl`` as they complete; a rerun skips the ids already there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from blackbox_wd.baselines import TeacherEntailment
from blackbox_wd.baselines.dse import final_answer_entails
from blackbox_wd.errors import BBWDError
from blackbox_wd.eval.data import Item
from blackbox_wd.eval.judge import LLMJudge
from blackbox_wd.eval.labels import prompt_labels
from blackbox_wd.pipeline import Detector, Result, as_messages


def result_row(item: Item, result: Result, labels: dict[str, int]) -> dict[str, Any]:
    """The results.jsonl object of one prompt."""
    return {"id": item.id, "source": item.source, "kind": item.kind, "question": item.question,
            "answers": item.answers, "responses": result.responses, "token_counts": result.token_counts,
            "avg_wd": result.avg_wd, "eigen_wd": result.eigen_wd, **result.baselines,
            "lne_source": result.lne_source, **labels, "D": result.D.tolist(), "timings": result.timings}


def done_rows(path: Path) -> list[dict[str, Any]]:
    """Complete rows already in results.jsonl (a torn last line is dropped)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def evaluate(detector: Detector, items: Iterable[Item], out_dir: Path, dse: bool = True,
             judge: LLMJudge | None = None,
             progress: Callable[[int, dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Score and label every item; return all rows of results.jsonl (earlier runs' included)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.jsonl"
    rows = done_rows(path)
    seen = {r["id"] for r in rows}
    params = detector.settings.sampling()
    with open(path, "a", encoding="utf-8") as f:
        for item in items:
            if item.id in seen:
                continue
            messages = as_messages(item.prompt)
            t0 = time.perf_counter()
            sample_set = detector.sampler.sample(messages, params)
            sample_set.seconds = time.perf_counter() - t0
            entails = None
            if dse:  # math: same final answer; QA: the teacher LM's yes/no entailment
                entails = final_answer_entails if item.kind == "math" else TeacherEntailment(detector.teacher, item.question)
            result = detector.score_many([(messages, sample_set)], baselines=True, judges=[entails])[0]
            if isinstance(result, BBWDError):
                row = {"id": item.id, "source": item.source, "error": str(result)}
            else:
                result.timings = {"sample": sample_set.seconds, **result.timings}
                labels = prompt_labels(item.kind, result.responses, item.answers)
                if judge is not None:
                    labels["label_judge"] = judge.label(item.question, item.answers, result.responses[0])
                row = result_row(item, result, labels)
            f.write(json.dumps(row) + "\n")
            f.flush()
            rows.append(row)
            if progress:
                progress(len(rows), row)
    return rows
