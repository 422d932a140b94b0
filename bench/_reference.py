"""The previous teacher pass and local sampler, kept as the benches' reference ("current path" before
shared prefixes): every response runs with its whole prompt, and every sampled row prefills its prompt.

``PreviousTeacher.encode_ids``: the (prompt + response) sequences of all pairs, sorted by length,
right-padded into batches under the token budget, each cut after block ``layer`` (no cache).
``PreviousSampler.sample_many``: every row's whole prompt, left-padded, through one ``generate``.
Both share the model and the draw (inverse CDF, per-sample seeds) of the objects they wrap, so only
the prefix handling differs.

``PaddedTeacher``: today's pass as it was before responses ran in runs of similar length (#24): all
of a prompt chunk's responses right-padded together, one pass per token budget.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

from blackbox_wd.clients.local import InverseCDFDraw, LocalSampler, row_generators
from blackbox_wd.records import Messages, SampleSet, SamplingParams, TokenStates
from blackbox_wd.teachers.hf import HFTeacher
from blackbox_wd.teachers.pad import pad_batch


class _Stop(Exception):
    """Raised by the hook to skip the blocks above the layer."""


class PreviousTeacher(HFTeacher):
    """HFTeacher whose pass runs prompt + response for every response (the path before shared prefixes)."""

    @classmethod
    def wrap(cls, teacher: HFTeacher) -> PreviousTeacher:
        """The same model, tokenizer, layer and projection."""
        return cls(
            teacher.model,
            teacher.tokenizer,
            name=teacher.name,
            layer=teacher.layer,
            proj_dim=teacher.proj_dim,
            proj_seed=teacher.proj_seed,
            token_budget=teacher.token_budget,
        )

    def encode_ids(self, pairs: Sequence[tuple[list[int], list[int]]], logprobs: bool = False) -> list[TokenStates]:
        """Teacher-force (prompt ids, response ids) pairs, batched by total length under the token budget."""
        for i, pair in enumerate(pairs):
            self.check(i, *pair)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out: list[TokenStates | None] = [None] * len(pairs)
        for chunk in self._sequence_chunks(order, pairs):
            for i, ts in zip(chunk, self._forward([pairs[i] for i in chunk], logprobs), strict=True):
                out[i] = ts
        return out  # type: ignore[return-value]

    def _sequence_chunks(self, order: list[int], pairs: Sequence[tuple[list[int], list[int]]]) -> list[list[int]]:
        """Consecutive groups of the length-sorted indices whose padded size fits the token budget."""
        chunks: list[list[int]] = [[]]
        for i in order:
            length = len(pairs[i][0]) + len(pairs[i][1])
            if chunks[-1] and (len(chunks[-1]) + 1) * length > self.token_budget:
                chunks.append([])
            chunks[-1].append(i)
        return chunks

    @torch.inference_mode()
    def _forward(self, pairs: Sequence[tuple[list[int], list[int]]], logprobs: bool) -> list[TokenStates]:
        """One right-padded forward pass over a batch of prompt+response sequences."""
        ids, mask = pad_batch([p + r for p, r in pairs], self.tokenizer.pad_token_id or 0)
        ids, mask = ids.to(self.device), mask.to(self.device)
        self.tokens.real += int(mask.sum())
        self.tokens.padded += ids.numel()
        captured: list[torch.Tensor] = []

        def hook(_module, _args, output):
            captured.append(output[0] if isinstance(output, tuple) else output)
            if not logprobs:
                raise _Stop

        handle = self._blocks[self.layer - 1].register_forward_hook(hook)
        try:
            decoder = self.model.get_decoder()
            last_hidden = decoder(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        except _Stop:
            last_hidden = None
        finally:
            handle.remove()
        mid = captured[0].float()
        out = []
        for row, (prompt, response) in enumerate(pairs):
            lo, hi = len(prompt), len(prompt) + len(response)
            states = mid[row, lo:hi].cpu().double().numpy()
            lp = None
            if last_hidden is not None:
                lp = self._token_logprobs(last_hidden[row, lo - 1 : hi - 1], ids[row, lo:hi])
            out.append(TokenStates(states=states @ self.projection, last=states[-1].copy(), logprobs=lp))
        return out


class PaddedTeacher(HFTeacher):
    """HFTeacher whose responses run padded to the longest of their budget-sized chunk (before length runs)."""

    def _runs(self, lengths: list[int], extra: int) -> list[list[int]]:
        """As many rows per pass as the token budget holds."""
        return self._chunks(lengths, extra)


class PreviousSampler(LocalSampler):
    """LocalSampler whose rows each prefill their whole prompt in ``generate`` (no shared prefix)."""

    @torch.inference_mode()
    def sample_many(
        self, requests: Sequence[tuple[Messages, int]], params: SamplingParams, answers: bool = False
    ) -> list[SampleSet]:
        """``k`` samples for each (messages, k), every row's prompt left-padded into one ``generate`` call;
        with ``answers``, each prompt's greedy answer from one more call of its own (as eval did)."""
        sets = self._draw(requests, params)
        if answers:
            greedy = SamplingParams(k=1, temperature=0.0, top_p=1.0, max_tokens=params.max_tokens, seed=params.seed)
            for ss, (messages, _) in zip(sets, requests, strict=True):
                ss.answer = self._draw([(messages, 1)], greedy)[0].samples[0]
        return sets

    def _draw(self, requests: Sequence[tuple[Messages, int]], params: SamplingParams) -> list[SampleSet]:
        """The previous ``sample_many``: every row prefills its whole prompt."""
        pad = self.pad_id()
        ids, mask = pad_batch([self.teacher.prompt_ids(m) for m, k in requests for _ in range(k)], pad, left=True)
        device = self.teacher.device
        draw = LogitsProcessorList()
        if params.temperature > 0:
            draw.append(TemperatureLogitsWarper(params.temperature))
            if params.top_p < 1.0:
                draw.append(TopPLogitsWarper(params.top_p))
            draw.append(InverseCDFDraw(row_generators(requests, params.seed)))
        out = self.teacher.model.generate(
            ids.to(device),
            attention_mask=mask.to(device),
            do_sample=False,
            logits_processor=draw,
            temperature=None,
            top_p=None,
            top_k=None,
            max_new_tokens=params.max_tokens,
            min_new_tokens=1,
            pad_token_id=pad,
        )
        samples = iter(self.samples(out[:, ids.shape[1] :].tolist()))
        return [SampleSet([next(samples) for _ in range(k)]) for _, k in requests]
