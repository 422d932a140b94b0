"""Correctness labels of answers; hallucination = 1 when the judged answer is incorrect.

QA (NQ-open, SciQ, SQuAD):
* ``rouge`` (primary, the reference protocol): correct when ROUGE-L F1 (``rouge-score``, no
  stemming) against any reference answer is >= 0.5.
* ``em`` (secondary): exact match or containment after SQuAD normalisation (lowercase, drop
  punctuation, the articles a/an/the and extra whitespace): correct when a normalised reference
  equals the normalised response or occurs in it as a whole-word span. A string that normalises
  to nothing ("A+", "---") is compared lowercased with its whitespace collapsed instead.

MATH-500: correct when the response's final answer (the last ``\\boxed{...}`` first) verifies
against a reference with math-verify (:func:`blackbox_wd.signals.answers.mathcheck.math_correct`).

Prompt-level label: that of the judged answer (``eval.run``: the greedy answer, or the first of
the K samples); ``hallucination_label`` returns 1 when it is incorrect, 0 when correct.
"""

from __future__ import annotations

from collections.abc import Sequence

from blackbox_wd.signals.answers.mathcheck import math_correct
from blackbox_wd.signals.answers.text import em_key, has_rouge_tokens, max_rouge_l

ROUGE_THRESHOLD = 0.5
LABEL_SCHEMES = ("rouge", "em")


def qa_correct_rouge(response: str, answers: Sequence[str], threshold: float = ROUGE_THRESHOLD) -> bool:
    """Correct when ROUGE-L F1 against any reference is >= threshold.

    A reference without any ROUGE token (no ASCII letter or digit, e.g. Japanese) is matched by
    the exact-match rule instead, since its ROUGE-L would be 0 against everything.
    """
    if max_rouge_l(response, [a for a in answers if has_rouge_tokens(a)]) >= threshold:
        return True
    return qa_correct_em(response, [a for a in answers if not has_rouge_tokens(a)])


def qa_correct_em(response: str, answers: Sequence[str]) -> bool:
    """Correct when a normalised reference equals the normalised response or is a word span of it."""
    resp = em_key(response)
    padded = f" {resp} "
    for a in answers:
        ref = em_key(a)
        if not ref:
            continue
        if ref == resp or f" {ref} " in padded:
            return True
    return False


def is_correct(kind: str, response: str, answers: Sequence[str], scheme: str = "rouge") -> bool:
    """Correctness of one response: kind 'qa' (scheme 'rouge' or 'em') or 'math' (scheme ignored)."""
    if kind == "math":
        return math_correct(response, answers)
    if kind != "qa":
        raise ValueError(f"unknown item kind '{kind}': use 'qa' or 'math'")
    if scheme == "rouge":
        return qa_correct_rouge(response, answers)
    if scheme == "em":
        return qa_correct_em(response, answers)
    raise ValueError(f"unknown label scheme '{scheme}': use one of {', '.join(LABEL_SCHEMES)}")


def hallucination_label(kind: str, answer: str, answers: Sequence[str], scheme: str = "rouge") -> int:
    """Label of one judged answer: 1 = hallucination (incorrect), 0 = correct."""
    return 0 if is_correct(kind, answer, answers, scheme) else 1


def prompt_labels(kind: str, answer: str, answers: Sequence[str], suffix: str = "") -> dict[str, int]:
    """Every label of a judged answer: {'label' + suffix: primary, 'label_em' + suffix: secondary (QA only)}."""
    out = {f"label{suffix}": hallucination_label(kind, answer, answers, "rouge")}
    if kind == "qa":
        out[f"label_em{suffix}"] = hallucination_label(kind, answer, answers, "em")
    return out
