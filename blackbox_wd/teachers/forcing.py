"""Teacher forcing with a Hugging Face causal LM: mid-layer states of exactly the response tokens (:class:`HFTeacher`,
made ready from a name by ``hf.ready_teacher``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from blackbox_wd.records import TokenStates
from blackbox_wd.teachers.card import TextReader, resolve_layer
from blackbox_wd.teachers.levels import Levels, attach
from blackbox_wd.teachers.pad import length_runs, pad_batch
from blackbox_wd.teachers.prefix import Prefix, SharedMemo, decoder_pass, read_prompts
from blackbox_wd.teachers.projection import PROJ_DIM, PROJ_SEED, projection_matrix
from blackbox_wd.teachers.teacher import Teacher, distinct_pairs


@dataclass
class TokenCount:
    """Tokens a teacher has run: ``real`` ones and ``padded`` (real plus padding)."""

    real: int = 0
    padded: int = 0


class _Stop(Exception):
    """Raised by the mid-layer hook to skip the layers above it."""


class HFTeacher(Teacher):
    """Teacher-forces responses through a causal LM and returns their mid-layer token states.

    The layer is ell = floor(L / 2) unless given; ``hidden_states[ell]`` in transformers' numbering,
    i.e. the output of decoder block ell - 1. Only the blocks up to ell run unless log-probs are
    asked for. States are projected by the fixed matrix of ``projection.projection_matrix``.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        name: str = "",
        layer: int | None = None,
        proj_dim: int = PROJ_DIM,
        proj_seed: int = PROJ_SEED,
        token_budget: int = 16384,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.n_layers = int(model.config.get_text_config().num_hidden_layers)
        self.layer = resolve_layer(self.n_layers, layer)
        self.hidden_size = int(model.config.get_text_config().hidden_size)
        self.proj_dim = proj_dim
        self.proj_seed = proj_seed
        self.projection = projection_matrix(self.hidden_size, proj_dim, proj_seed)
        self.token_budget = token_budget
        self.max_length = getattr(model.config.get_text_config(), "max_position_embeddings", None)
        self.reader = TextReader.of(tokenizer, self.max_length)
        self._blocks = model.get_decoder().layers
        attach(model)  # shared prefixes, and compiled layers on a GPU (``teachers.levels``), in bbwd's passes only
        self.memo = SharedMemo(self.n_layers)  # the last shared prompt prefix, for the teacher and its sampler
        self.tokens = TokenCount()  # running totals over every pass, for benchmarks

    @property
    def device(self) -> torch.device:
        """Device of the model's weights."""
        return next(self.model.parameters()).device

    @torch.inference_mode()
    def encode_ids(self, pairs: Sequence[tuple[list[int], list[int]]], logprobs: bool = False) -> list[TokenStates]:
        """Teacher-force (prompt ids, response ids) pairs: each distinct prompt runs once, each distinct
        response of it once, batched by length under the token budget.

        The tokens a chunk's prompts share at their start (a few-shot prompt's exemplars) run once, then
        each prompt's rest left-padded, their keys and values kept; the responses then run right-padded (on
        CPU in runs of similar length, ``_runs``), attending to those in place (``teachers.prefix``). Pairs
        with the same prompt and response get the same TokenStates object. With ``logprobs`` the whole model runs
        (LNE needs the logits), else only the blocks up to the layer.
        """
        for i, pair in enumerate(pairs):
            self.check(i, *pair)
        where = distinct_pairs(pairs)
        out: dict[int, TokenStates] = {}
        prompts = sorted(where, key=len)
        for chunk in self._chunks([len(p) for p in prompts], 0):
            group = [prompts[i] for i in chunk]
            prefix, last = self._prefill(group, logprobs)
            rows = sorted(((n, r) for n, p in enumerate(group) for r in where[p]), key=lambda row: len(row[1]))
            for part in self._runs([len(r) for _, r in rows], prefix.width):
                batch = [rows[i] for i in part]
                for (n, tokens), ts in zip(batch, self._respond(prefix, last, batch, logprobs), strict=True):
                    for i in where[group[n]][tokens]:
                        out[i] = ts
        return [out[i] for i in range(len(pairs))]

    def _runs(self, lengths: list[int], extra: int) -> list[list[int]]:
        """Runs of rows of ascending ``lengths``, one pass each: on CPU, where a padded token costs what a real one
        does, the split that pads little (``pad.length_runs``); on a GPU, whose padded rows run in parallel, as
        many rows as the token budget holds (the split was measured on CPU only)."""
        if self.device.type != "cpu":
            return self._chunks(lengths, extra)
        return length_runs(lengths, extra, self.token_budget)

    def _chunks(self, lengths: list[int], extra: int) -> list[list[int]]:
        """Consecutive runs of indices into ascending ``lengths`` whose padded size, each row
        ``extra`` + its longest length, fits the token budget (a single row always goes)."""
        chunks: list[list[int]] = [[]]
        for i, length in enumerate(lengths):
            if chunks[-1] and (len(chunks[-1]) + 1) * (extra + length) > self.token_budget:
                chunks.append([])
            chunks[-1].append(i)
        return chunks

    def _run(
        self, ids: torch.Tensor, valid: torch.Tensor, pos: torch.Tensor, levels: Levels, logprobs: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One forward pass over ``levels`` (``prefix.decoder_pass``): the states after block ``layer`` (and the
        final normed hidden states when ``logprobs``; else the blocks above the layer are skipped), as (R, Q, H)
        rows."""
        real = int(valid.sum())
        self.tokens.real += real
        self.tokens.padded += ids.numel() if levels.packed is None else real
        captured: list[torch.Tensor] = []

        def hook(_module, _args, output):
            captured.append(output[0] if isinstance(output, tuple) else output)
            if not logprobs:
                raise _Stop

        handle = self._blocks[self.layer - 1].register_forward_hook(hook)
        try:
            last = decoder_pass(self.model)(ids, valid, pos, levels)
        except _Stop:
            last = None
        finally:
            handle.remove()
        return (captured[0] if levels.packed is None else levels.unpack(captured[0])), last

    def _prefill(self, prompts: list[tuple[int, ...]], logprobs: bool) -> tuple[Prefix, torch.Tensor | None]:
        """Read the prompts once; their prefix, and the final hidden state at each prompt's last token."""
        return read_prompts(
            prompts,
            self.tokenizer.pad_token_id or 0,
            self.device,
            lambda ids, valid, pos, levels: self._run(ids, valid, pos, levels, logprobs)[1],
            self.memo,
        )

    def _respond(
        self, prefix: Prefix, last: torch.Tensor | None, rows: list[tuple[int, tuple[int, ...]]], logprobs: bool
    ) -> list[TokenStates]:
        """Teacher-force responses (row: index of its prompt in the prefix, response ids) after their prompts."""
        ids, mask = pad_batch([r for _, r in rows], self.tokenizer.pad_token_id or 0)
        ids, valid = ids.to(self.device), mask.bool().to(self.device)
        index = torch.tensor([n for n, _ in rows], device=self.device)
        pos = prefix.lengths[index, None] + torch.arange(ids.shape[1], device=self.device)
        levels = prefix.continuation(index)
        levels.step(pos, valid, packed=True)
        mid, hidden = self._run(ids, valid, pos, levels, logprobs)
        # Projected where the states are: a GPU sends back 128 numbers a token, not the hidden size's.
        lengths = torch.tensor([len(r) for _, r in rows], device=mid.device)
        projected = (mid.double() @ torch.from_numpy(self.projection).to(mid.device)).cpu().numpy()
        lasts = mid[torch.arange(len(rows), device=mid.device), lengths - 1].double().cpu().numpy()
        out = []
        for row, (n, response) in enumerate(rows):
            lp = None
            if hidden is not None and last is not None:
                before = torch.cat(
                    [last[n : n + 1], hidden[row, : len(response) - 1]]
                )  # the state preceding each token
                lp = self._token_logprobs(before, ids[row, : len(response)])
            out.append(TokenStates(states=projected[row, : len(response)].copy(), last=lasts[row], logprobs=lp))
        return out

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits (float32) from final hidden states, soft-capped as the model caps them."""
        logits = self.model.get_output_embeddings()(hidden).float()
        cap = getattr(self.model.config.get_text_config(), "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def _token_logprobs(self, hidden: torch.Tensor, targets: torch.Tensor) -> np.ndarray:
        """log p(target_t | prefix) from the final hidden states preceding each target token."""
        lp = torch.log_softmax(self.logits(hidden), dim=-1).gather(-1, targets[:, None])[:, 0]
        return lp.cpu().double().numpy()
