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
from blackbox_wd.settings import fingerprint


PROTOCOL = "zero-shot"  # how dataset items become prompts (eval.data); part of the fingerprint


def result_row(item: Item, result: Result, labels: dict[str, int]) -> dict[str, Any]:
    """The results.jsonl object of one prompt."""
    return {"id": item.id, "source": item.source, "kind": item.kind, "question": item.question,
            "answers": item.answers, "responses": result.responses, "token_counts": result.token_counts,
            "avg_wd": result.avg_wd, "eigen_wd": result.eigen_wd, **result.baselines,
            "lne_source": result.lne_source, **labels, "D": result.D.tolist(), "timings": result.timings}


def done_rows(path: Path, fingerprint: str, hashes: dict[str, str]) -> list[dict[str, Any]]:
    """Rows of an earlier run to keep: checked against this run's fingerprint and input, transient errors dropped.

    ``hashes`` maps every item id of the data file to its line's hash. A torn last line is cut off;
    a file that is not bbwd eval output, or comes from other settings or another input, is refused
    and left as it is.
    """
    if not path.exists():
        return []
    rows, lines = [], path.read_text(encoding="utf-8").splitlines(keepends=True)
    for n, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines) and not line.endswith("\n") and rows:  # torn by a crash mid-write
                break
            raise BBWDError(f"{path} line {n} is not JSON: not bbwd eval output; remove it or use another -o") from None
        if not isinstance(row, dict) or not {"id", "fingerprint", "input_hash"} <= row.keys():
            raise BBWDError(f"{path} line {n} is not a bbwd eval row; remove it or use another -o")
        if row["fingerprint"] != fingerprint:
            raise BBWDError(f"{path} was written with other settings (fingerprint {row['fingerprint']}, this run "
                            f"{fingerprint}): resume with the same settings, or use another -o")
        if hashes.get(row["id"]) != row["input_hash"]:
            raise BBWDError(f"{path} line {n} (id {row['id']}) comes from another input: use another -o")
        rows.append(row)
    keep = [r for r in rows if not r.get("transient")]
    path.write_text("".join(json.dumps(r) + "\n" for r in keep), encoding="utf-8")
    return keep


def evaluate(detector: Detector, items: Iterable[Item], out_dir: Path, dse: bool = True,
             judge: LLMJudge | None = None, hashes: dict[str, str] | None = None,
             progress: Callable[[int, dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Score and label every item; return all rows of results.jsonl (earlier runs' included).

    ``hashes`` (id -> line hash of the whole data file) lets a rerun keep rows of items outside
    ``items``; by default only ``items`` are known.
    """
    items = list(items)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.jsonl"
    fp = fingerprint({**detector.reported_settings(), "protocol": PROTOCOL})
    rows = done_rows(path, fp, hashes if hashes is not None else {it.id: it.input_hash for it in items})
    seen = {r["id"] for r in rows}
    params = detector.settings.sampling()
    with open(path, "a", encoding="utf-8") as f:
        for item in items:
            if item.id in seen:
                continue
            messages = as_messages(item.prompt)
            t0 = time.perf_counter()
            try:
                sample_set = detector.sampler.sample(messages, params)
            except BBWDError as exc:
                sample_set = exc
            seconds = time.perf_counter() - t0
            entails = None
            if dse:  # math: same final answer; QA: the teacher LM's yes/no entailment
                entails = final_answer_entails if item.kind == "math" else TeacherEntailment(detector.teacher, item.question)
            result = sample_set if isinstance(sample_set, BBWDError) else \
                detector.score_many([(messages, sample_set)], baselines=True, judges=[entails])[0]
            if isinstance(result, BBWDError):
                row = {"id": item.id, "source": item.source, "error": str(result), "transient": result.transient}
            else:
                result.timings = {"sample": seconds, **result.timings}
                labels = prompt_labels(item.kind, result.responses[0], item.answers)
                if judge is not None:
                    labels["label_judge"] = judge.label(item.question, item.answers, result.responses[0])
                row = result_row(item, result, labels)
            row.update(fingerprint=fp, input_hash=item.input_hash)
            f.write(json.dumps(row) + "\n")
            f.flush()
            rows.append(row)
            if progress:
                progress(len(rows), row)
    return rows
