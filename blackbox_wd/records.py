"""Plain data passed between the stages: samples in, token states out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from blackbox_wd.errors import BBWDError

Messages = list[dict[str, str]]
# A JSON object as ``json.loads`` gives it and ``json.dumps`` writes it (a row, a request's body, settings as
# reported), and one only read
JSONObject = dict[str, Any]
JSONView = Mapping[str, Any]

# continuous labels of a passage in [0, 1], higher = more hallucination: WikiBio's human score (mean of 0 / 0.5 / 1
# over its sentences), the long-form sets' share of unsupported claims
PASSAGE_LABELS = ("human_score", "unsupported_share")


def as_messages(prompt: str | Messages) -> Messages:
    """A prompt string becomes a single user message; a message list is checked and passed on."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise BBWDError("prompt is empty")
        return [{"role": "user", "content": prompt}]
    if not prompt or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in prompt):
        raise BBWDError("messages must be a non-empty list of {role, content} objects")
    return prompt


@dataclass(frozen=True)
class Sample:
    """One sampled response of the target model.

    ``token_ids`` are set only by a local sampler whose tokenizer is the teacher's (white-box);
    ``token_logprobs`` only when the target API returned per-token log-probabilities.
    """

    text: str
    token_ids: tuple[int, ...] | None = None
    token_logprobs: tuple[float, ...] | None = None
    finish_reason: str | None = None
    cached: bool = False


@dataclass(frozen=True)
class SamplingParams:
    """How the K responses are drawn from the target: samples ``start`` to ``start + k - 1`` of the prompt.

    Sample i depends on the prompt, the settings, the seed and i only, so that samples 0-2 drawn alone and then
    3-4 (two rounds of ``-k auto``) are samples 0-4 drawn at once (for llama.cpp, up to the rounding of its
    batches: see ``clients.llamacpp``).
    """

    k: int = 10
    temperature: float = 0.5
    top_p: float = 1.0
    max_tokens: int = 128
    seed: int | None = 0
    start: int = 0  # the index of the first sample drawn: a round of ``-k auto`` draws samples start .. start + k - 1


@dataclass
class Usage:
    """API token and request counts for one or more prompts."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_completion_tokens: int = 0
    requests: int = 0
    cache_hits: int = 0
    retries: int = 0

    def add(self, other: Usage) -> None:
        """Accumulate ``other`` into this object."""
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class SampleSet:
    """The K samples drawn for one prompt, with what drawing them cost."""

    samples: list[Sample]
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    answer: Sample | None = None  # the judged answer forced with them (a greedy one, a record's response, ...)
    answer_sentences: tuple[str, ...] | None = None  # the answer's own sentences, in order; None: spaCy splits it
    claims: tuple[str, ...] | None = None  # statements about the judged answer, each scored (``claims``)


@dataclass
class TokenStates:
    """Teacher-forced view of one response.

    ``states``: (m, 128) projected mid-layer states of the response tokens (no prompt, no EOS).
    ``last``: (d,) unprojected mid-layer state of the last response token (sentence embedding).
    ``logprobs``: (m,) teacher log-probabilities of the response tokens, when asked for.
    """

    states: np.ndarray
    last: np.ndarray
    logprobs: np.ndarray | None = None

    @property
    def n_tokens(self) -> int:
        """Number of response tokens."""
        return int(self.states.shape[0])
