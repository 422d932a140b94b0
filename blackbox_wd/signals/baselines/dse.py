"""DSE: discrete semantic entropy (Farquhar, Kossen, Kuhn & Gal, "Detecting hallucinations in large
language models using semantic entropy", Nature 630, 2024; reference code
jlko/semantic_uncertainty ``get_semantic_ids`` and ``cluster_assignment_entropy``).

Pinned variant:

1. Greedy clustering by bidirectional entailment. Walk the responses in order; an unassigned
   response i opens a new cluster, and every later unassigned response j joins it when
   ``entails(y_i, y_j) and entails(y_j, y_i)`` (the cluster is represented by its first member,
   as in the reference code; we skip j that already have a cluster, which is the same whenever
   the judge is transitive and saves calls). Two responses that are equal after ``str.strip()``
   are equivalent without asking the judge.
2. DSE = -sum_c p_c ln p_c with p_c = |cluster c| / K (natural log). 0 when all K responses share
   one meaning, ln K when all differ. Higher = more likely hallucination.

Entailment judge: a callable ``entails(premise, hypothesis) -> bool`` passed in by the caller
(``bbwd eval --dse``); one with a ``prefetch(pairs)`` method is asked for each cluster's pairs in
one batch:

* ``exact_match_entails`` (``answer``, short answers): equal after SQuAD normalisation
  (``answers.text.em_key``, the exact-match label's normalisation); no model calls.
* ``final_answer_entails`` (``answer`` for MATH): equivalent final answers (math-verify).
* ``nli.NLIEntailment`` (``nli``): a sequence-classification NLI model, the reference's choice
  (DeBERTa-large-MNLI), for longer answers.
* ``TeacherEntailment(teacher, question)`` (``teacher``): the teacher LM itself is asked (chat
  template, one user turn) whether answer A entails answer B given the question, and says yes
  when logsumexp of the logits of its "yes" tokens beats that of its "no" tokens at the first
  position of the reply (Farquhar et al. also use LLM judges with the question in the prompt).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from blackbox_wd.signals.answers.mathcheck import same_final_answer
from blackbox_wd.signals.answers.text import em_key
from blackbox_wd.teachers.pad import pad_batch

Entails = Callable[[str, str], bool]

YES_WORDS = ("yes", "Yes", " yes", " Yes", "YES")
NO_WORDS = ("no", "No", " no", " No", "NO")


def semantic_ids(responses: Sequence[str], entails: Entails) -> list[int]:
    """Greedy cluster ids (0, 1, ... in order of first appearance) by bidirectional entailment."""
    ids = [-1] * len(responses)
    next_id = 0
    prefetch = getattr(entails, "prefetch", None)  # a model judge answers a batch of pairs at once
    for i, a in enumerate(responses):
        if ids[i] != -1:
            continue
        ids[i] = next_id
        if prefetch:
            open_ = [b for j, b in enumerate(responses[i + 1 :], i + 1) if ids[j] == -1 and b.strip() != a.strip()]
            prefetch([(a, b) for b in open_])
            prefetch([(b, a) for b in open_ if entails(a, b)])
        for j in range(i + 1, len(responses)):
            if ids[j] != -1:
                continue
            b = responses[j]
            if a.strip() == b.strip() or (entails(a, b) and entails(b, a)):
                ids[j] = next_id
        next_id += 1
    return ids


def cluster_entropy(ids: Sequence[int]) -> float:
    """-sum_c p_c ln p_c of the cluster frequencies p_c = n_c / K."""
    if len(ids) == 0:
        raise ValueError("no cluster ids")
    _, counts = np.unique(np.asarray(ids), return_counts=True)
    p = counts / counts.sum()
    return float(-np.sum(p * np.log(p))) + 0.0  # + 0.0: one cluster gives 0.0, not -0.0


def discrete_semantic_entropy(responses: Sequence[str], entails: Entails) -> float:
    """DSE of K responses: entropy of the bidirectional-entailment cluster frequencies."""
    if len(responses) < 1:
        raise ValueError("semantic entropy needs at least one response")
    return cluster_entropy(semantic_ids(responses, entails))


def exact_match_entails(premise: str, hypothesis: str) -> bool:
    """Answer-equivalence judge: equal after SQuAD normalisation (lowercase, no punctuation/articles)."""
    return em_key(premise) == em_key(hypothesis)


def final_answer_entails(premise: str, hypothesis: str) -> bool:
    """Judge for math: two solutions mean the same when their final answers are equivalent.

    The final answer is the last ``\\boxed{}`` first (math-verify's extraction), compared by
    ``answers.mathcheck.same_final_answer``; a solution without one means the same only as an equal string.
    """
    return same_final_answer(premise, hypothesis)


def entailment_prompt(premise: str, hypothesis: str, question: str | None = None) -> str:
    """The yes/no question put to the teacher LM."""
    head = f'We are evaluating answers to the question "{question}".\n' if question else ""
    return (
        f"{head}Answer A: {premise}\nAnswer B: {hypothesis}\n"
        "Does Answer A entail Answer B, that is, if Answer A is true, must Answer B also be true? "
        "Reply with yes or no only."
    )


class TeacherEntailment:
    """Entailment judge from a causal LM teacher (``HFTeacher``: ``.model``, ``.tokenizer``,
    ``.prompt_ids(messages)``): yes when the yes-token logits beat the no-token logits.

    Results are cached per (premise, hypothesis); make one judge per question. ``threshold``
    (default 0: yes more likely than no) is the margin above which the judge says yes. Only
    yes/no spellings that are a single token of the teacher's tokenizer are used.

    A judge is only as good as its LM: the embedded SmolLM2-135M answers "no" to nearly every
    pair (margin about -0.8 even for "Paris" vs "Paris"), so DSE with it degenerates towards ln K;
    use an instruction-tuned teacher of a few billion parameters for a meaningful DSE.
    """

    def __init__(self, teacher: Any, question: str | None = None, threshold: float = 0.0) -> None:
        self.teacher = teacher
        self.question = question
        self.threshold = threshold
        yes, no = self._first_tokens(YES_WORDS), self._first_tokens(NO_WORDS)
        unk = getattr(teacher.tokenizer, "unk_token_id", None)
        drop = (set(yes) & set(no)) | ({unk} if unk is not None else set())
        self.yes_ids = [t for t in yes if t not in drop]
        self.no_ids = [t for t in no if t not in drop]
        if not self.yes_ids or not self.no_ids:
            raise ValueError("the teacher's tokenizer has no distinct yes / no tokens")
        self.cache: dict[tuple[str, str], float] = {}
        self.calls = 0

    def _first_tokens(self, words: Sequence[str]) -> list[int]:
        """Ids of the words that are one token each (a split word's first piece, e.g. "Y", is no answer)."""
        out: list[int] = []
        for w in words:
            ids = self.teacher.tokenizer.encode(w, add_special_tokens=False)
            if len(ids) == 1 and ids[0] not in out:
                out.append(int(ids[0]))
        return out

    def margin(self, premise: str, hypothesis: str) -> float:
        """logsumexp(yes logits) - logsumexp(no logits) at the first reply position."""
        self.prefetch([(premise, hypothesis)])
        return self.cache[(premise, hypothesis)]

    def prefetch(self, pairs: Sequence[tuple[str, str]], batch_size: int = 16) -> None:
        """Margins of (premise, hypothesis) pairs not yet cached, in left-padded batched forwards."""
        todo = list(dict.fromkeys(p for p in pairs if p not in self.cache))
        pad = getattr(self.teacher.tokenizer, "pad_token_id", None) or 0
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            seqs = [
                self.teacher.prompt_ids([{"role": "user", "content": entailment_prompt(a, b, self.question)}])
                for a, b in chunk
            ]
            ids, mask = pad_batch(seqs, pad, left=True)
            positions = (mask.cumsum(1) - 1).clamp(min=0)
            dev = self.teacher.device
            with torch.inference_mode():
                logits = (
                    self.teacher.model(
                        input_ids=ids.to(dev),
                        attention_mask=mask.to(dev),
                        position_ids=positions.to(dev),
                        logits_to_keep=1,
                    )
                    .logits[:, -1]
                    .float()
                )
            margins = torch.logsumexp(logits[:, self.yes_ids], 1) - torch.logsumexp(logits[:, self.no_ids], 1)
            for pair, m in zip(chunk, margins.tolist(), strict=True):
                self.cache[pair] = m
            self.calls += len(chunk)

    def __call__(self, premise: str, hypothesis: str) -> bool:
        return self.margin(premise, hypothesis) > self.threshold
