"""Loaders for the evaluation JSONL files (the data README) and the prompt protocols.

A record is one object a line with keys ``id``, ``question``, ``answers`` (list), ``source`` and
optionally ``context``. Its style: ``math`` when ``source`` starts with "math", else
``reading`` (reading comprehension) with a non-empty ``context``, else ``closed-book``. Nothing
depends on the file's name: any JSONL in this format works.

Protocols (pinned; the target sees exactly these messages):

* ``few-shot`` (default): for each QA style, the exemplars are the LAST ``N_SHOTS`` = 5 records of
  that style in file order (from the end, away from the first N that ``--limit N`` scores); they
  are never scored. Each exemplar is a user turn (its prompt) and an assistant turn (its first
  reference answer), in file order, before the question's own user turn::

      Answer with only the answer: a few words, not a sentence.
      [Context: {context}]
      Question: {question}

* ``zero-shot``: one user turn, no exemplars, every record scored::

      Answer the question using the context.          Answer the question briefly.
      Context: {context}                              Question: {question}
      Question: {question}
      Answer briefly.

* MATH, under both protocols (its answer is a ``\\boxed{}``, not a short phrase)::

      Solve the problem. Be concise and put the final answer in \\boxed{}.
      Problem: {question}

* ``recorded``: a file whose records carry ``samples`` (what a model already answered, e.g.
  ``wikibio_gpt3_dev.jsonl``, ``sac3_nq_open.jsonl``) is scored on those samples as they are, with
  no sampling and no target. The prompt is the record's ``prompt`` (else its ``question``) as one
  user turn, verbatim; ``response`` is the judged answer when present. Labels come from the file:
  ``label`` (0/1, 1 = hallucination) and/or a passage label in [0, 1], higher = more hallucination
  (``human_score``, or ``unsupported_share``: the share of the judged answer's claims that are
  unsupported); ``sentences`` (the response's own, in order) with as many ``sentence_labels`` are
  kept, and need a ``response``. Such a record is ``qa`` when it
  carries reference ``answers``, else a ``passage``. Every record of a file must be of one kind:
  recorded or not.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blackbox_wd.calibration.evaluation.labels import CLAIM_LABELS, SENTENCE_LABELS
from blackbox_wd.checks import is_finite_number
from blackbox_wd.records import PASSAGE_LABELS
from blackbox_wd.run.inputs import line_hash
from blackbox_wd.settings import RECORDED  # the protocol of a file whose records carry their samples

DATA_ENV = "BBWD_DATA_DIR"
DATASETS = {
    "nq": "nq_open_dev.jsonl",
    "sciq": "sciq_validation.jsonl",
    "squad": "squad_v1.1_dev.jsonl",
    "math500": "math500_test.jsonl",
}
PROTOCOLS = ("few-shot", "zero-shot")
N_SHOTS = 5
QA_STYLES = ("closed-book", "reading")

QA_CONTEXT_PROMPT = "Answer the question using the context.\nContext: {context}\nQuestion: {question}\nAnswer briefly."
QA_PROMPT = "Answer the question briefly.\nQuestion: {question}"
SHORT_CONTEXT_PROMPT = (
    "Answer with only the answer: a few words, not a sentence.\nContext: {context}\nQuestion: {question}"
)
SHORT_PROMPT = "Answer with only the answer: a few words, not a sentence.\nQuestion: {question}"
MATH_PROMPT = "Solve the problem. Be concise and put the final answer in \\boxed{{}}.\nProblem: {question}"


@dataclass(frozen=True)
class Item:
    """One evaluation record with its reference answers; ``messages`` is what the target sees."""

    id: str
    question: str
    answers: list[str]
    kind: str  # 'qa' or 'math'
    source: str
    context: str = ""
    input_hash: str = ""  # logs.line_hash of the record's line in the data file
    messages: list[dict[str, str]] = field(default_factory=list)
    protocol: str = ""  # 'few-shot' when messages show exemplars, 'recorded' with samples, else 'zero-shot'
    samples: tuple[str, ...] = ()  # recorded samples: scored as they are, never drawn
    response: str | None = None  # the recorded judged answer
    labels: dict[str, Any] = field(default_factory=dict)  # labels from the file: label, human_score, sentences

    @property
    def style(self) -> str:
        """'math', 'passage', 'reading' (a non-empty context) or 'closed-book'."""
        if self.kind in ("math", "passage"):
            return self.kind
        return "reading" if self.context else "closed-book"

    @property
    def recorded(self) -> bool:
        """True when the record carries its own samples."""
        return bool(self.samples)


@dataclass(frozen=True)
class Dataset:
    """The items to score (prompts built), the exemplars they show, and every record's line hash."""

    items: list[Item]
    exemplars: dict[str, list[Item]]  # QA style -> its exemplars, in file order
    hashes: dict[str, str]  # id -> line hash, for every record of the file (exemplars included)
    protocol: str

    @property
    def recorded(self) -> bool:
        """True when the items carry their own samples: scored as they are, no target, no sampling."""
        return self.protocol == RECORDED

    def described(self) -> dict[str, Any]:
        """The protocol as reported and fingerprinted: its name and the exemplar ids per style."""
        if self.recorded:
            return {"prompts": RECORDED}
        return {
            "prompts": self.protocol,
            "exemplars": {style: [ex.id for ex in shots] for style, shots in self.exemplars.items() if shots},
        }


def data_dir() -> Path:
    """Where a dataset's short name is looked up.

    Returns
    -------
    Path
        $BBWD_DATA_DIR, else the current directory.
    """
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else Path.cwd()


def resolve_path(path_or_name: str | os.PathLike[str]) -> Path:
    """A dataset short name (nq, sciq, squad, math500) -> its file in ``data_dir()``; paths pass."""
    key = str(path_or_name)
    if key in DATASETS:
        return data_dir() / DATASETS[key]
    return Path(path_or_name).expanduser()


def kind_of(source: str) -> str:
    """'math' for MATH sources, 'qa' for everything else."""
    return "math" if source.lower().startswith("math") else "qa"


def user_prompt(item: Item, protocol: str) -> str:
    """The question's user turn under a protocol (see the module docstring)."""
    question = item.question.strip()
    if item.style == "math":
        return MATH_PROMPT.format(question=question)
    short = protocol == "few-shot"
    if item.style == "reading":
        return (SHORT_CONTEXT_PROMPT if short else QA_CONTEXT_PROMPT).format(context=item.context, question=question)
    return (SHORT_PROMPT if short else QA_PROMPT).format(question=question)


def exemplar_turns(exemplars: Sequence[Item], protocol: str) -> list[dict[str, str]]:
    """Each exemplar as a user turn (its prompt) and an assistant turn (its first reference answer)."""
    return [
        turn
        for ex in exemplars
        for turn in (
            {"role": "user", "content": user_prompt(ex, protocol)},
            {"role": "assistant", "content": ex.answers[0]},
        )
    ]


def pick_exemplars(items: list[Item]) -> dict[str, list[Item]]:
    """The last N_SHOTS records of each QA style, in file order."""
    return {style: [it for it in items if it.style == style][-N_SHOTS:] for style in QA_STYLES}


def _strings(record: dict, key: str, where: str, min_len: int) -> list[str]:
    """A list of at least ``min_len`` non-empty strings under ``key``; ValueError naming it otherwise."""
    value = record.get(key)
    if not isinstance(value, list) or len(value) < min_len or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{where}'{key}' must be a list of at least {min_len} non-empty strings")
    return value


def recorded_labels(record: dict, where: str = "") -> dict[str, Any]:
    """The labels a recorded record carries: ``label`` (0/1), ``PASSAGE_LABELS`` (each a number in [0, 1]),
    ``sentences`` with ``sentence_labels`` (as many); ValueError naming a malformed one."""
    out: dict[str, Any] = {}
    if record.get("label") is not None:
        if record["label"] not in (0, 1) or isinstance(record["label"], float):
            raise ValueError(f"{where}'label' must be 0 or 1")
        out["label"] = int(record["label"])
    for key in PASSAGE_LABELS:
        score = record.get(key)
        if score is not None:
            if not is_finite_number(score) or not 0 <= score <= 1:
                raise ValueError(f"{where}'{key}' must be a number in [0, 1]")
            out[key] = float(score)
    if "sentences" in record:
        sentences = _strings(record, "sentences", where, 1)
        labels = record.get("sentence_labels")
        if not isinstance(labels, list) or not all(lab in SENTENCE_LABELS for lab in labels):
            raise ValueError(f"{where}'sentence_labels' must give one of {', '.join(SENTENCE_LABELS)} per sentence")
        if len(labels) != len(sentences):
            raise ValueError(f"{where}'sentence_labels' has {len(labels)} labels for {len(sentences)} 'sentences'")
        out.update(sentences=sentences, sentence_labels=labels)
    if "claims" in record:
        claims = record["claims"]
        if not isinstance(claims, list) or not all(
            isinstance(c, dict)
            and isinstance(c.get("text"), str)
            and c["text"].strip()
            and c.get("label") in CLAIM_LABELS
            for c in claims
        ):
            raise ValueError(
                f"{where}'claims' must be a list of {{text, label}} with label one of {', '.join(CLAIM_LABELS)}"
            )
        out["claims"] = [{"text": c["text"], "label": c["label"]} for c in claims]
        scores = record.get("claim_scores")
        if isinstance(scores, dict):  # the authors' own per-claim scores, one per claim, kept to compare with
            out["claim_scores"] = {
                k: v
                for k, v in scores.items()
                if isinstance(v, list) and len(v) == len(claims) and all(is_finite_number(x) for x in v)
            }
    if not out:
        raise ValueError(f"{where}a recorded record needs 'label', 'human_score', 'unsupported_share' or 'claims'")
    return out


def parse_recorded(record: dict, where: str = "", input_hash: str = "") -> Item:
    """One record with ``samples`` -> Item (its prompt as one user turn); ValueError naming a malformed key."""
    for key in ("id", "source"):
        if key not in record:
            raise ValueError(f"{where}missing key '{key}'")
    prompt = record.get("prompt", record.get("question"))
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"{where}'prompt' (or 'question') must be a non-empty string")
    response = record.get("response")
    if response is not None and (not isinstance(response, str) or not response.strip()):
        raise ValueError(f"{where}'response' must be a non-empty string")
    if response is None and "sentences" in record:
        raise ValueError(f"{where}'sentences' are the judged answer's: the record needs a 'response'")
    answers = _strings(record, "answers", where, 1) if "answers" in record else []
    return Item(
        id=str(record["id"]),
        question=str(record.get("question", prompt)),
        answers=answers,
        kind="qa" if answers else "passage",
        source=str(record["source"]),
        input_hash=input_hash,
        messages=[{"role": "user", "content": prompt}],
        protocol=RECORDED,
        samples=tuple(_strings(record, "samples", where, 2)),
        response=response,
        labels=recorded_labels(record, where),
    )


def parse_record(record: dict, where: str = "", input_hash: str = "") -> Item:
    """One JSON object -> Item (no messages yet); ValueError naming the missing or malformed key.

    A record with ``samples`` is a recorded one (:func:`parse_recorded`)."""
    if "samples" in record:
        return parse_recorded(record, where, input_hash)
    for key in ("id", "question", "answers", "source"):
        if key not in record:
            raise ValueError(f"{where}missing key '{key}'")
    answers = record["answers"]
    if isinstance(answers, str) or not isinstance(answers, list) or not answers:
        raise ValueError(f"{where}'answers' must be a non-empty list of strings")
    source = str(record["source"])
    return Item(
        id=str(record["id"]),
        question=str(record["question"]),
        answers=[str(a) for a in answers],
        kind=kind_of(source),
        source=source,
        context=str(record.get("context") or "").strip(),
        input_hash=input_hash,
    )


def read(path: str | os.PathLike[str]) -> list[Item]:
    """Every record of a JSONL file or a named dataset, in file order (blank lines skipped)."""
    p = resolve_path(path)
    if not p.is_file():
        raise FileNotFoundError(f"evaluation data not found: {p} (set {DATA_ENV} to the data folder)")
    items = []
    with open(p, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{p}:{lineno}: not JSON: {exc.msg}") from None
            items.append(parse_record(record, f"{p}:{lineno}: ", line_hash(line.encode())))
    return items


def load(
    path: str | os.PathLike[str], protocol: str = "few-shot", limit: int | None = None, require_context: bool = False
) -> Dataset:
    """The first ``limit`` items (all when None) to score under ``protocol``, exemplars excluded.

    ``require_context`` keeps only records with a non-empty context (e.g. SciQ with its support).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol '{protocol}': use one of {', '.join(PROTOCOLS)}")
    every = read(path)
    if any(it.recorded for it in every):
        if not all(it.recorded for it in every):
            raise ValueError(f"{resolve_path(path)}: some records carry 'samples' and some do not: one kind a file")
        items = every if limit is None else every[: max(limit, 0)]
        return Dataset(items, {}, {it.id: it.input_hash for it in every}, RECORDED)
    exemplars = pick_exemplars(every) if protocol == "few-shot" else {}
    shown = {ex.id for shots in exemplars.values() for ex in shots}
    turns = {style: exemplar_turns(shots, protocol) for style, shots in exemplars.items()}  # shared by all items
    items = [
        dataclasses.replace(
            it,
            messages=[*turns.get(it.style, []), {"role": "user", "content": user_prompt(it, protocol)}],
            protocol="few-shot" if turns.get(it.style) else "zero-shot",
        )
        for it in every
        if it.id not in shown and (it.context or not require_context)
    ]
    if limit is not None:
        items = items[: max(limit, 0)]
    return Dataset(items, exemplars, {it.id: it.input_hash for it in every}, protocol)
