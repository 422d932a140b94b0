"""DSE: discrete semantic entropy (Farquhar, Kossen, Kuhn & Gal, "Detecting hallucinations in large
language models using semantic entropy", Nature 630, 2024; reference code
jlko/semantic_uncertainty ``get_semantic_ids`` and ``cluster_assignment_entropy``).

Pinned variant:

1. Greedy clustering by bidirectional entailment. Walk the responses in order; an unassigned
   response i opens a new cluster, and every later unassigned response j joins it when
   ``entails(y_i, y_j) and entails(y_j, y_i)`` (the cluster is represented by its first member,
   as in the reference code; we skip j that already have a cluster, which is the same whenever
   the check is transitive and saves calls). Two responses that are equal after ``str.strip()``
   are equivalent without asking the check.
2. DSE = -sum_c p_c ln p_c with p_c = |cluster c| / K (natural log). 0 when all K responses share
   one meaning, ln K when all differ. Higher = more likely hallucination.

Entailment check: a callable ``entails(premise, hypothesis) -> bool`` passed in by the caller
(``bbwd eval --dse``); one with a ``prefetch(pairs)`` method is asked for each cluster's pairs in
one batch:

* ``exact_match_entails`` (``answer``, short answers): equal after SQuAD normalisation
  (``answers.text.em_key``, the exact-match label's normalisation); no model calls.
* ``entailment.final_answer_entails`` (``answer`` for MATH): equivalent final answers (math-verify).
* ``nli.NLIEntailment`` (``nli``): a sequence-classification NLI model, the reference's choice
  (DeBERTa-large-MNLI), for longer answers.
* ``entailment.TeacherEntailment(teacher, question)`` (``teacher``): the teacher LM itself is asked (chat
  template, one user turn) whether answer A entails answer B given the question, and says yes
  when logsumexp of the logits of its "yes" tokens beats that of its "no" tokens at the first
  position of the reply (Farquhar et al. also use LLM judges with the question in the prompt).

This module needs numpy only; the checks that need torch or math-verify are in ``entailment``, imported by the doors
that use them (``bbwd score`` and the calibration's members import this one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from blackbox_wd.signals.answers.text import em_key

Entails = Callable[[str, str], bool]


def semantic_ids(responses: Sequence[str], entails: Entails) -> list[int]:
    """Greedy cluster ids (0, 1, ... in order of first appearance) by bidirectional entailment."""
    ids = [-1] * len(responses)
    next_id = 0
    prefetch = getattr(entails, "prefetch", None)  # a model's check answers a batch of pairs at once
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
    """Answer-equivalence check: equal after SQuAD normalisation (lowercase, no punctuation/articles)."""
    return em_key(premise) == em_key(hypothesis)
