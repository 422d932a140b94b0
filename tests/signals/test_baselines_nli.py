"""The NLI entailment judge for DSE on a tiny random BERT classifier built locally (no hub)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import save_tiny_nli

from blackbox_wd.errors import BBWDError
from blackbox_wd.signals.baselines import discrete_semantic_entropy, semantic_ids
from blackbox_wd.signals.baselines.nli import NLIEntailment, entailment_id, load_nli

RESPONSES = ["paris", "it is paris", "rome is a big city", "london"]


def test_entailment_label_is_found_by_name():
    assert entailment_id({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}) == 2
    assert entailment_id({0: "entailment", 1: "not_entailment"}) == 0
    with pytest.raises(BBWDError, match="entailment"):
        entailment_id({0: "LABEL_0", 1: "LABEL_1"})


def test_verdicts_are_the_models_argmax(tiny_nli_dir):
    nli = load_nli(str(tiny_nli_dir))
    assert nli.entailment_id == 2 and nli.max_length == 64 and nli.model.dtype == torch.float32
    pairs = [(a, b) for a in RESPONSES for b in RESPONSES if a != b]
    expected = {}
    for a, b in pairs:  # one pair at a time, no padding
        with torch.inference_mode():
            logits = nli.model(**nli.tokenizer(a, b, return_tensors="pt")).logits[0]
        expected[(a, b)] = int(logits.argmax()) == 2
    assert len(set(expected.values())) == 2  # the random model says yes to some pairs and no to others
    batched = NLIEntailment(nli, batch_size=5)  # padded batches of unequal lengths
    batched.prefetch(pairs)
    assert batched.cache == expected and batched.calls == len(pairs)
    batched.prefetch(pairs)
    assert batched.calls == len(pairs)  # cached
    lazy = NLIEntailment(nli)
    assert semantic_ids(RESPONSES, lazy) == semantic_ids(RESPONSES, batched)
    assert all(lazy(a, b) == expected[(a, b)] for a, b in pairs)


@pytest.mark.parametrize("bias,dse", [(50.0, 0.0), (-50.0, math.log(4))])
def test_dse_with_a_judge_that_always_or_never_entails(tmp_path, bias, dse):
    # +50 on the ENTAILMENT logit: every pair entails -> one cluster -> DSE 0;
    # -50: no pair does -> four clusters of one -> ln 4
    judge = NLIEntailment(load_nli(str(save_tiny_nli(tmp_path / "m", bias))))
    assert discrete_semantic_entropy(RESPONSES, judge) == pytest.approx(dse)


def test_missing_model_is_one_error(tmp_path):
    with pytest.raises(BBWDError, match="could not load NLI model"):
        load_nli(str(tmp_path / "nowhere"))
