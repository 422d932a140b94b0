"""Baselines scored on the same K samples as AvgWD/EigenWD; one module per method.

============  ======================================  =====================================
key           function                                 input
============  ======================================  =====================================
``lne``       :func:`lne.lne`                          K arrays of token log-probs
``ls``        :func:`ls.lexical_similarity`            K response strings
``es``        :func:`es.eigenscore`                    (K, d) sentence embeddings
``er``        :func:`er.effective_rank`                (K, d) sentence embeddings
``dse``       :func:`dse.discrete_semantic_entropy`    K strings + ``entails`` check
============  ======================================  =====================================

DSE's NLI entailment check is ``nli``, its math and teacher checks ``entailment`` (math-verify, torch: neither is
imported here).
Beside them the **peers** (:mod:`peers`): lm-polygraph's model-free estimators over the K strings (``PEERS``), and
with a judged answer their per-answer variants (``ANSWER_PEERS``).

Every score is oriented so that higher = more likely hallucination.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from blackbox_wd.signals.baselines.dse import Entails, discrete_semantic_entropy, exact_match_entails, semantic_ids
from blackbox_wd.signals.baselines.er import effective_rank
from blackbox_wd.signals.baselines.es import ES_ALPHA, eigenscore
from blackbox_wd.signals.baselines.lne import lne
from blackbox_wd.signals.baselines.ls import lexical_similarity
from blackbox_wd.signals.baselines.peers import ANSWER_PEERS, PEERS, peer_scores

BASELINES = ("lne", "ls", "es", "er", "dse")

__all__ = [
    "ANSWER_PEERS",
    "BASELINES",
    "PEERS",
    "ES_ALPHA",
    "Entails",
    "compute_baselines",
    "discrete_semantic_entropy",
    "effective_rank",
    "eigenscore",
    "exact_match_entails",
    "lexical_similarity",
    "lne",
    "peer_scores",
    "semantic_ids",
]


def compute_baselines(
    responses: Sequence[str],
    *,
    logprobs: Sequence[Sequence[float]] | None = None,
    embeddings: Sequence[np.ndarray] | np.ndarray | None = None,
    entails: Entails | None = None,
    es_alpha: float = ES_ALPHA,
    answer: str | None = None,
) -> dict[str, float]:
    """All baselines computable from what is given, keyed lne/ls/es/er/dse and the peers.

    ``ls`` and the peers (``PEERS``) always; ``lne`` when ``logprobs`` is given; ``es`` and ``er`` when
    ``embeddings`` (the K ``TokenStates.last`` vectors) are; ``dse`` when an ``entails`` check is; the answer's
    peers (``ANSWER_PEERS``) when the judged ``answer`` is.
    """
    out: dict[str, float] = {}
    if logprobs is not None:
        out["lne"] = lne(logprobs)
    out["ls"] = lexical_similarity(responses)
    out.update(peer_scores(responses, answer))
    if embeddings is not None:
        z = np.stack([np.asarray(e, dtype=float) for e in embeddings])
        out["es"] = eigenscore(z, es_alpha)
        out["er"] = effective_rank(z)
    if entails is not None:
        out["dse"] = discrete_semantic_entropy(responses, entails)
    return out
