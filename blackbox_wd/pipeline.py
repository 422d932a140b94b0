"""The one path from a prompt to scores: samples -> token states -> D -> AvgWD, EigenWD."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from blackbox_wd.baselines import Entails, compute_baselines, discrete_semantic_entropy
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams, TokenStates, Usage
from blackbox_wd.scores import avg_wd, eigen_wd, median_bandwidth
from blackbox_wd.settings import Settings, fingerprint
from blackbox_wd.teachers.hf import HFTeacher, load_teacher
from blackbox_wd.transport import pairwise_w2


class Sampler(Protocol):
    """Anything that draws K responses for a prompt."""

    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet: ...


@dataclass
class Result:
    """Scores of one prompt with the responses, D and the exact settings that produced them."""

    prompt: Messages
    responses: list[str]
    token_counts: list[int]
    D: np.ndarray
    avg_wd: float
    eigen_wd: float
    settings: dict[str, Any]
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    baselines: dict[str, float] = field(default_factory=dict)
    lne_source: str | None = None  # "api" (target's token logprobs) or "teacher" (teacher-forced)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (D as nested lists)."""
        out = asdict(self)
        out["D"] = self.D.tolist()
        return out


def as_messages(prompt: str | Messages) -> Messages:
    """A prompt string becomes a single user message; a message list is checked and passed on."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise BBWDError("prompt is empty")
        return [{"role": "user", "content": prompt}]
    if not prompt or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in prompt):
        raise BBWDError("messages must be a non-empty list of {role, content} objects")
    return prompt


def scores_from_states(states: list[TokenStates], alpha: float, p: float) -> tuple[np.ndarray, float, float]:
    """D, AvgWD and EigenWD from the projected token states of the K responses."""
    d = pairwise_w2([s.states for s in states])
    return d, avg_wd(d), eigen_wd(d, alpha, p)


class Detector:
    """Scores prompts with a teacher and a target sampler under fixed settings."""

    def __init__(self, teacher: HFTeacher, sampler: Sampler, settings: Settings) -> None:
        self.teacher = teacher
        self.sampler = sampler
        self.settings = settings

    @classmethod
    def from_settings(cls, settings: Settings) -> "Detector":
        """Load the teacher and build the sampler the settings name."""
        from blackbox_wd.clients import api_sampler_for, local_sampler_for

        api = api_sampler_for(settings)  # first: a missing API key fails before any model loads
        teacher = load_teacher(settings.teacher, settings.device, settings.dtype, settings.layer, settings.token_budget)
        return cls(teacher, api or local_sampler_for(settings, teacher), settings)

    def reported_settings(self, d: np.ndarray | None = None) -> dict[str, Any]:
        """The settings as run (resolved layer, projection, API endpoint, fingerprint; D's bandwidth when given)."""
        out = asdict(self.settings)
        endpoint = getattr(self.sampler, "endpoint", None)
        out.update(target=self.settings.target or self.settings.teacher, white_box=self.settings.white_box,
                   endpoint=endpoint.host if endpoint is not None else None,
                   layer=self.teacher.layer, n_layers=self.teacher.n_layers, proj_dim=self.teacher.proj_dim,
                   proj_seed=self.teacher.proj_seed, device=str(self.teacher.device))
        out["fingerprint"] = fingerprint(out)
        if d is not None:
            out["bandwidth"] = median_bandwidth(d)
        return out

    def fingerprint(self) -> str:
        """The fingerprint of the settings that change a prompt's score (``settings.fingerprint``)."""
        return self.reported_settings()["fingerprint"]

    def _teacher_input(self, sample: Sample) -> str | tuple[int, ...]:
        """Reuse the sampled token ids when the sampler is this teacher's own model."""
        if sample.token_ids is not None and getattr(self.sampler, "teacher", None) is self.teacher:
            return sample.token_ids
        return sample.text

    def score(self, prompt: str | Messages, responses: list[str] | None = None) -> Result:
        """Sample K responses (unless given), teacher-force them, and score."""
        messages = as_messages(prompt)
        t0 = time.perf_counter()
        sample_set = SampleSet([Sample(r) for r in responses]) if responses is not None else \
            self.sampler.sample(messages, self.settings.sampling())
        return self.score_samples(messages, sample_set, {"sample": time.perf_counter() - t0})

    def score_samples(self, messages: Messages, sample_set: SampleSet,
                      timings: dict[str, float] | None = None) -> Result:
        """Teacher-force and score samples that are already drawn."""
        result = self.score_many([(messages, sample_set)])[0]
        if isinstance(result, BBWDError):
            raise result
        result.timings = {**(timings or {}), **result.timings}
        return result

    def score_many(self, items: list[tuple[Messages, SampleSet]], baselines: bool = False,
                   judges: Sequence[Entails | None] | None = None) -> list[Result | BBWDError]:
        """Score several prompts with one length-bucketed teacher pass over all their responses.

        A prompt whose input is unusable (fewer than 2 responses, an empty or over-long response)
        gets its BBWDError in its slot; the others are scored. Each result's teacher time is its
        share of the pass, in proportion to its token count. With ``baselines`` the pass runs the
        full model (LNE needs log-probs) and LNE, LS, ES, ER (and DSE where ``judges`` gives an
        entailment judge for the prompt) are computed on the same samples; the timings hold
        ``baselines`` (LNE, LS, ES, ER) and ``dse`` apart.
        """
        out: list[Result | BBWDError | None] = [None] * len(items)
        pairs: list[tuple[list[int], list[int]]] = []
        spans: dict[int, slice] = {}
        for n, (messages, sample_set) in enumerate(items):
            try:
                own = self._pairs(messages, sample_set.samples)
            except BBWDError as exc:
                out[n] = exc
                continue
            spans[n] = slice(len(pairs), len(pairs) + len(own))
            pairs.extend(own)
        t0 = time.perf_counter()
        states = self.teacher.encode_ids(pairs, logprobs=baselines) if pairs else []
        teacher_time = time.perf_counter() - t0
        total_tokens = sum(len(r) for _, r in pairs) or 1
        for n, span in spans.items():
            messages, sample_set = items[n]
            own = states[span]
            t1 = time.perf_counter()
            d, avg, eig = scores_from_states(own, self.settings.alpha, self.settings.p)
            counts = [s.n_tokens for s in own]
            timings = {"teacher": teacher_time * sum(counts) / total_tokens, "transport": time.perf_counter() - t1}
            result = Result(prompt=messages, responses=[s.text for s in sample_set.samples], token_counts=counts,
                            D=d, avg_wd=avg, eigen_wd=eig, settings=self.reported_settings(d),
                            usage=sample_set.usage, timings=timings)
            if baselines:
                t2 = time.perf_counter()
                self._add_baselines(result, sample_set.samples, own)
                timings["baselines"] = time.perf_counter() - t2
                judge = judges[n] if judges else None
                if judge is not None:
                    t3 = time.perf_counter()
                    result.baselines["dse"] = discrete_semantic_entropy(result.responses, judge)
                    timings["dse"] = time.perf_counter() - t3
            out[n] = result
        return out  # type: ignore[return-value]

    @staticmethod
    def _add_baselines(result: Result, samples: list[Sample], states: list[TokenStates]) -> None:
        """LNE (API log-probs when every sample has them, else the teacher's), LS, ES, ER."""
        api = all(s.token_logprobs for s in samples)
        logprobs = [s.token_logprobs for s in samples] if api else [s.logprobs for s in states]
        result.baselines = compute_baselines(result.responses, logprobs=logprobs,
                                             embeddings=[s.last for s in states])
        result.lne_source = "api" if api else "teacher"

    def _pairs(self, messages: Messages, samples: list[Sample]) -> list[tuple[list[int], list[int]]]:
        """(prompt ids, response ids) for each sample, checked against the teacher's limits."""
        if len(samples) < 2:
            raise BBWDError(f"need at least 2 responses, got {len(samples)}")
        prompt = self.teacher.prompt_ids(messages)
        pairs = [(prompt, self.teacher.response_ids(self._teacher_input(s))) for s in samples]
        for i, pair in enumerate(pairs):
            self.teacher.check(i, *pair)
        return pairs
