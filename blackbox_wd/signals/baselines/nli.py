"""NLI entailment check for DSE: any Hugging Face sequence-classification NLI model.

The reference is ``microsoft/deberta-large-mnli`` (Farquhar et al. 2024, jlko/semantic_uncertainty
``EntailmentDeberta``): the (premise, hypothesis) pair is encoded as one sequence pair, and the
premise entails the hypothesis when the argmax label is the entailment label. DSE asks both
directions (``dse.semantic_ids``). The model is loaded once (``load_nli``: ``AutoTokenizer`` +
``AutoModelForSequenceClassification``, on the teacher's device, fp16 on CUDA and fp32 on CPU); the
entailment label is found in ``config.id2label`` by name, case-insensitive. ``NLIEntailment`` (one
per prompt) answers the pairs the greedy clustering needs in padded batches under
``torch.inference_mode`` and caches them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from blackbox_wd.errors import BBWDError

MAX_LENGTH = 512  # tokens of a (premise, hypothesis) pair, at most; longer pairs are truncated


@dataclass(frozen=True)
class NLIModel:
    """A loaded NLI classifier, its tokenizer and the index of its entailment label."""

    model: Any
    tokenizer: Any
    entailment_id: int
    name: str

    @property
    def max_length(self) -> int:
        """Longest pair the model takes: MAX_LENGTH, its tokenizer's or its positions' limit if smaller."""
        positions = getattr(self.model.config, "max_position_embeddings", None) or MAX_LENGTH
        return int(min(MAX_LENGTH, self.tokenizer.model_max_length, positions))


def entailment_id(id2label: Mapping[int, str]) -> int:
    """The index whose label is 'entailment' (any case); BBWDError when there is none."""
    hits = [int(i) for i, label in id2label.items() if str(label).lower() == "entailment"]
    if len(hits) != 1:
        raise BBWDError(f"the NLI model's labels {dict(id2label)} have no single 'entailment' label")
    return hits[0]


def load_nli(name: str, device: torch.device | str = "cpu") -> NLIModel:
    """Load an NLI model (hub id or local folder) for inference on ``device``: fp16 on CUDA, else fp32."""
    device = torch.device(device)
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForSequenceClassification.from_pretrained(name, dtype=dtype)
    except (OSError, ValueError) as exc:  # not found, hub unreachable, not a classifier
        raise BBWDError(f"could not load NLI model '{name}': {str(exc).splitlines()[0]}") from exc
    return NLIModel(model.to(device).eval(), tokenizer, entailment_id(model.config.id2label), name)


class NLIEntailment:
    """``entails(premise, hypothesis)``: the NLI model's argmax label is entailment; cached per pair."""

    def __init__(self, nli: NLIModel, batch_size: int = 32) -> None:
        self.nli = nli
        self.batch_size = batch_size
        self.cache: dict[tuple[str, str], bool] = {}
        self.calls = 0

    def prefetch(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Verdicts of the pairs not yet cached, in padded batches."""
        todo = list(dict.fromkeys(p for p in pairs if p not in self.cache))
        model, tok = self.nli.model, self.nli.tokenizer
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            enc = tok(
                [a for a, _ in chunk],
                [b for _, b in chunk],
                padding=True,
                truncation=True,
                max_length=self.nli.max_length,
                return_tensors="pt",
            ).to(model.device)
            with torch.inference_mode():
                verdicts = model(**enc).logits.argmax(-1) == self.nli.entailment_id
            self.cache.update(zip(chunk, verdicts.tolist(), strict=True))
            self.calls += len(chunk)

    def __call__(self, premise: str, hypothesis: str) -> bool:
        self.prefetch([(premise, hypothesis)])
        return self.cache[(premise, hypothesis)]
