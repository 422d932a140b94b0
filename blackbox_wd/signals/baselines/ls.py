"""LS: lexical similarity of the K responses, as a hallucination score.

Pinned variant (Lin, Trivedi & Sun, "Generating with Confidence: Uncertainty Quantification for
Black-box Large Language Models", TMLR 2024; the "Lexical Similarity" baseline of Chen et al.,
INSIDE, ICLR 2024)::

    sim = mean over unordered pairs i < j of ROUGE-L F1(y_i, y_j)
    LS  = 1 - sim

ROUGE-L F1 is ``rouge-score``'s (``RougeScorer(["rougeL"], use_stemmer=False)``, its default tokenizer:
lowercase, non-alphanumerics to spaces), to the bit, with the longest common subsequence from RapidFuzz.
ROUGE-L F1 is symmetric, so the pair order does not matter. We report ``1 - sim`` so that higher = more
likely hallucination, and the score stays in [0, 1] (0: all responses lexically identical).
"""

from __future__ import annotations

from collections.abc import Sequence

from blackbox_wd.signals.answers.text import distinct, pair_mean, rouge_l_f1s, rouge_tokens


def mean_pairwise_rouge_l(responses: Sequence[str]) -> float:
    """Mean ROUGE-L F1 over the unordered pairs i < j (each distinct response tokenised and each pair of distinct
    responses scored once)."""
    if len(responses) < 2:
        raise ValueError("lexical similarity needs at least 2 responses")
    unique, which = distinct(responses)
    return pair_mean(rouge_l_f1s([rouge_tokens(r) for r in unique]), which)


def lexical_similarity(responses: Sequence[str]) -> float:
    """LS = 1 - mean pairwise ROUGE-L F1; higher = more likely hallucination."""
    return 1.0 - mean_pairwise_rouge_l(responses)
