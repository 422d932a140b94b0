"""The previous teacher pass and local sampler, kept as the benches' reference ("current path" before
shared prefixes): every response runs with its whole prompt, and every sampled row prefills its prompt.

``PreviousTeacher.encode_ids``: the (prompt + response) sequences of all pairs, sorted by length,
right-padded into batches under the token budget, each cut after block ``layer`` (no cache).
``PreviousSampler.sample_many``: every row's whole prompt, left-padded, through one ``generate``.
Both share the model and the draw (inverse CDF, per-sample seeds) of the objects they wrap, so only
the prefix handling differs.

``PaddedTeacher``: today's pass as it was before responses ran in runs of similar length (#24): all
of a prompt chunk's responses right-padded together, one pass per token budget.

The path of issue #13, before the few-shot prefix was shared (#24), is kept too:
``CopiedTeacher.encode_ids``: each distinct prompt once (left-padded, whole), its DynamicCache copied
to the rows of its responses. ``CopiedSampler.sample_many``: the prompts prefilled once, the cache
copied to every sample row, then one ``generate`` that decodes every row until the longest stops.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import (
    Cache,
    DynamicCache,
    LogitsProcessorList,
    PreTrainedModel,
    TemperatureLogitsWarper,
    TopPLogitsWarper,
)

from blackbox_wd.clients.local import InverseCDFDraw, LocalSampler, row_generators
from blackbox_wd.records import Messages, SampleSet, SamplingParams, TokenStates
from blackbox_wd.teachers.hf import HFTeacher
from blackbox_wd.teachers.pad import pad_batch
from blackbox_wd.teachers.prefix import left_padded, positions


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


def select_rows(cache: Cache, index: torch.Tensor) -> Cache:
    """A copy of ``cache`` whose row r is row ``index[r]`` of it (repeats allowed); ``cache`` is not changed."""
    out = copy.copy(cache)
    out.layers = [copy.copy(layer) for layer in cache.layers]
    out.reorder_cache(index)  # index_select on the copies: new tensors, the originals stay
    return out


def new_cache(model: PreTrainedModel) -> DynamicCache:
    """An empty cache with the layer kinds (full or sliding-window attention) of the model's config."""
    return DynamicCache(config=model.config)


@dataclass
class CopiedPrefix:
    """Left-padded prompts run once: their cache, attention mask and real lengths."""

    cache: Cache
    mask: torch.Tensor  # (B, P) 1 on real prompt tokens
    lengths: torch.Tensor  # (B,)

    @property
    def width(self) -> int:
        """P: the padded prompt length."""
        return int(self.mask.shape[1])

    def continuation(self, index: Sequence[int], mask: torch.Tensor) -> tuple[Cache, torch.Tensor, torch.Tensor]:
        """Cache copy, full attention mask and position ids for rows that continue prompts ``index``."""
        rows = torch.as_tensor(list(index), dtype=torch.long, device=self.mask.device)
        full = torch.cat([self.mask[rows], mask.to(self.mask.device)], dim=1)
        pos = self.lengths[rows, None] + torch.arange(mask.shape[1], device=self.mask.device)
        return select_rows(self.cache, rows), full, pos


class CopiedTeacher(HFTeacher):
    """HFTeacher as of #13: each prompt read whole once, its cache copied to its responses' rows."""

    @classmethod
    def wrap(cls, teacher: HFTeacher) -> CopiedTeacher:
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

    @torch.inference_mode()
    def encode_ids(self, pairs: Sequence[tuple[list[int], list[int]]], logprobs: bool = False) -> list[TokenStates]:
        """Teacher-force (prompt ids, response ids) pairs: each distinct prompt once, each distinct response once."""
        for i, pair in enumerate(pairs):
            self.check(i, *pair)
        where: dict[tuple[int, ...], dict[tuple[int, ...], list[int]]] = {}
        for i, (prompt, response) in enumerate(pairs):
            where.setdefault(tuple(prompt), {}).setdefault(tuple(response), []).append(i)
        out: list[TokenStates | None] = [None] * len(pairs)
        prompts = sorted(where, key=len)
        for chunk in self._chunks([len(p) for p in prompts], 0):
            group = [prompts[i] for i in chunk]
            prefix, last = self._copied_prefill(group, logprobs)
            rows = sorted(((n, r) for n, p in enumerate(group) for r in where[p]), key=lambda row: len(row[1]))
            for part in self._chunks([len(r) for _, r in rows], prefix.width):
                batch = [rows[i] for i in part]
                for (n, response), ts in zip(batch, self._copied_respond(prefix, last, batch, logprobs), strict=True):
                    for i in where[group[n]][response]:
                        out[i] = ts
        return out  # type: ignore[return-value]

    def _cached_run(
        self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: Cache, logprobs: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One forward pass with a cache: the states after block ``layer`` (and the final hidden states)."""
        captured: list[torch.Tensor] = []

        def hook(_module, _args, output):
            captured.append(output[0] if isinstance(output, tuple) else output)
            if not logprobs:
                raise _Stop

        handle = self._blocks[self.layer - 1].register_forward_hook(hook)
        try:
            last = self.model.get_decoder()(
                input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True
            ).last_hidden_state
        except _Stop:
            last = None
        finally:
            handle.remove()
        return captured[0], last

    def _copied_prefill(
        self, prompts: list[tuple[int, ...]], logprobs: bool
    ) -> tuple[CopiedPrefix, torch.Tensor | None]:
        """Run the prompts once; their prefix, and the final hidden state at each prompt's last token."""
        ids, mask = left_padded(prompts, self.tokenizer.pad_token_id or 0, self.device)
        self.tokens.real += int(mask.sum())
        self.tokens.padded += ids.numel()
        cache = new_cache(self.model)
        _, last = self._cached_run(ids, mask, positions(mask), cache, logprobs)
        return CopiedPrefix(cache, mask, mask.sum(1)), None if last is None else last[:, -1]

    def _copied_respond(
        self, prefix: CopiedPrefix, last: torch.Tensor | None, rows: list[tuple[int, tuple[int, ...]]], logprobs: bool
    ) -> list[TokenStates]:
        """Teacher-force responses (row: index of its prompt in the prefix, response ids) after their prompts."""
        ids, mask = pad_batch([r for _, r in rows], self.tokenizer.pad_token_id or 0)
        ids = ids.to(self.device)
        self.tokens.real += int(mask.sum())
        self.tokens.padded += ids.numel()
        cache, full, pos = prefix.continuation([n for n, _ in rows], mask)
        mid, hidden = self._cached_run(ids, full, pos, cache, logprobs)
        mid = mid.float()
        out = []
        for row, (n, response) in enumerate(rows):
            states = mid[row, : len(response)].cpu().double().numpy()
            lp = None
            if hidden is not None and last is not None:
                before = torch.cat([last[n : n + 1], hidden[row, : len(response) - 1]])
                lp = self._token_logprobs(before, ids[row, : len(response)])
            out.append(TokenStates(states=states @ self.projection, last=states[-1].copy(), logprobs=lp))
        return out


class CopiedSampler(LocalSampler):
    """LocalSampler as of #13: prompts prefilled once, their cache copied per row, one ``generate`` call."""

    @torch.inference_mode()
    def sample_many(
        self, requests: Sequence[tuple[Messages, int]], params: SamplingParams, answers: bool = False
    ) -> list[SampleSet]:
        """``k`` samples for each (messages, k) (and each prompt's greedy answer), all in one ``generate`` call."""
        pad = self.pad_id()
        model, device = self.teacher.model, self.teacher.device
        ids, mask = left_padded([self.teacher.prompt_ids(m) for m, _ in requests], pad, device)
        cache = new_cache(model)
        if ids.shape[1] > 1:
            model(
                input_ids=ids[:, :-1],
                attention_mask=mask[:, :-1],
                position_ids=positions(mask[:, :-1]),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        width = [k + answers for _, k in requests]
        rows = torch.tensor([n for n, w in enumerate(width) for _ in range(w)], device=device)
        draw = LogitsProcessorList()
        if params.temperature > 0:
            draw.append(TemperatureLogitsWarper(params.temperature))
            if params.top_p < 1.0:
                draw.append(TopPLogitsWarper(params.top_p))
            draw.append(InverseCDFDraw(row_generators(requests, params.seed, answers)))
        out = model.generate(
            ids[rows],
            attention_mask=mask[rows],
            past_key_values=select_rows(cache, rows),
            do_sample=False,
            logits_processor=draw,
            temperature=None,
            top_p=None,
            top_k=None,
            max_new_tokens=params.max_tokens,
            min_new_tokens=1,
            pad_token_id=pad,
        )
        self.decoded += len(rows) * (out.shape[1] - ids.shape[1] - 1)  # every row runs to the longest
        drawn = iter(self.samples(out[:, ids.shape[1] :].tolist()))
        sets = []
        for _, k in requests:
            samples = [next(drawn) for _ in range(k)]
            sets.append(SampleSet(samples, answer=next(drawn) if answers else None))
        return sets
