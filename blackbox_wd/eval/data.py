"""Loaders for the evaluation JSONL files (``shared/data/README.md``): one object a line with keys
``id``, ``question``, ``answers`` (list), ``source``; SQuAD and SciQ also carry ``context``.

Prompts (pinned; the target sees exactly this as one user message):

* QA with a non-empty context (SQuAD, SciQ with a support paragraph)::

      Answer the question using the context.
      Context: {context}
      Question: {question}
      Answer briefly.

* QA without context (NQ-open, SciQ with an empty support)::

      Answer the question briefly.
      Question: {question}

* MATH (``source`` starting with "math")::

      Solve the problem. Be concise and put the final answer in \\boxed{}.
      Problem: {question}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from blackbox_wd.logs import line_hash

DATA_ENV = "BBWD_DATA_DIR"
DATASETS = {
    "nq": "nq_open_dev.jsonl",
    "sciq": "sciq_validation.jsonl",
    "squad": "squad_v1.1_dev.jsonl",
    "math500": "math500_test.jsonl",
}

QA_CONTEXT_PROMPT = "Answer the question using the context.\nContext: {context}\nQuestion: {question}\nAnswer briefly."
QA_PROMPT = "Answer the question briefly.\nQuestion: {question}"
MATH_PROMPT = "Solve the problem. Be concise and put the final answer in \\boxed{{}}.\nProblem: {question}"


@dataclass(frozen=True)
class Item:
    """One evaluation prompt with its reference answers; kind is 'qa' or 'math'."""

    id: str
    prompt: str
    answers: list[str]
    kind: str
    source: str
    question: str
    input_hash: str = ""  # logs.line_hash of the record's line in the data file


def data_dir() -> Path:
    """$BBWD_DATA_DIR, else ``shared/data`` beside the repository (``<repo>/../shared/data``)."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def resolve_path(path_or_name: str | os.PathLike[str]) -> Path:
    """A dataset short name (nq, sciq, squad, math500) -> its file in ``data_dir()``; paths pass."""
    key = str(path_or_name)
    if key in DATASETS:
        return data_dir() / DATASETS[key]
    return Path(path_or_name).expanduser()


def kind_of(source: str) -> str:
    """'math' for MATH sources, 'qa' for everything else."""
    return "math" if source.lower().startswith("math") else "qa"


def build_prompt(record: dict) -> str:
    """The prompt of one record (see the module docstring)."""
    question = record["question"].strip()
    if kind_of(record["source"]) == "math":
        return MATH_PROMPT.format(question=question)
    context = (record.get("context") or "").strip()
    if context:
        return QA_CONTEXT_PROMPT.format(context=context, question=question)
    return QA_PROMPT.format(question=question)


def parse_record(record: dict, where: str = "", input_hash: str = "") -> Item:
    """One JSON object -> Item; ValueError naming the missing or malformed key."""
    for key in ("id", "question", "answers", "source"):
        if key not in record:
            raise ValueError(f"{where}missing key '{key}'")
    answers = record["answers"]
    if isinstance(answers, str) or not isinstance(answers, list) or not answers:
        raise ValueError(f"{where}'answers' must be a non-empty list of strings")
    source = str(record["source"])
    return Item(id=str(record["id"]), prompt=build_prompt(record), answers=[str(a) for a in answers],
                kind=kind_of(source), source=source, question=str(record["question"]), input_hash=input_hash)


def load(path: str | os.PathLike[str], limit: int | None = None) -> Iterator[Item]:
    """Yield the first ``limit`` items (all when None) of a JSONL file or a named dataset."""
    p = resolve_path(path)
    if not p.is_file():
        raise FileNotFoundError(f"evaluation data not found: {p} (set {DATA_ENV} to the data folder)")
    if limit is not None and limit <= 0:
        return
    n = 0
    with open(p, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{p}:{lineno}: not JSON: {exc.msg}") from None
            yield parse_record(record, f"{p}:{lineno}: ", line_hash(line.encode()))
            n += 1
            if limit is not None and n >= limit:
                return
