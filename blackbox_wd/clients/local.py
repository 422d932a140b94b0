"""White-box sampling: K responses from a local transformers model with its own chat template."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from transformers import LogitsProcessor, TopPLogitsWarper

from blackbox_wd.clients.sampling import BatchSampler
from blackbox_wd.clients.seeds import sample_seed
from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams
from blackbox_wd.teachers.prefix import Prefix, decoder_pass, read_prompts

if TYPE_CHECKING:
    from blackbox_wd.teachers.forcing import HFTeacher


class InverseCDFDraw(LogitsProcessor):
    """Draws each row's next token from softmax(scores) by inverse CDF and gives it the only +inf score.

    Run as the last processor of a greedy ``generate``, it makes greedy search sample: the same
    categorical distribution as ``torch.multinomial``, whose CPU kernel draws one exponential per
    vocabulary entry (~100 ms a step for 80 rows of SmolLM2's 49k tokens, against ~6 ms here).
    Row r takes one uniform a step from ``generators[r]``, so its tokens depend on its own seed
    only, not on the rows batched with it; a row whose generator is None takes its most likely
    token (a greedy row beside sampled ones). The cumulative sum is in float64, so no token's
    probability is distorted by float32 rounding.
    """

    def __init__(self, generators: Sequence[torch.Generator | None]) -> None:
        self.generators = list(generators)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Scores with +inf at the drawn token of each row (others unchanged, all below it)."""
        drawn = draw_tokens(scores, self.generators)[:, None]
        scores.scatter_(1, drawn, float("inf"))
        return scores


def draw_tokens(scores: torch.Tensor, generators: Sequence[torch.Generator | None]) -> torch.Tensor:
    """Each row's token drawn from softmax(scores) by inverse CDF with one uniform from its generator
    (its most likely token where the generator is None): ``InverseCDFDraw``'s draw, (R,) ids."""
    drawn = scores.argmax(dim=-1)
    sampled = [r for r, g in enumerate(generators) if g is not None]
    if sampled:
        rows = torch.tensor(sampled, device=scores.device)
        cdf = torch.softmax(scores[rows], dim=-1).double().cumsum_(dim=-1)
        u = torch.cat([torch.rand(1, generator=generators[r], dtype=torch.float64) for r in sampled])
        drawn[rows] = torch.searchsorted(cdf, u[:, None].to(cdf.device) * cdf[:, -1:], right=True)[:, 0]
    return drawn.clamp_(max=scores.shape[-1] - 1)


def row_generators(
    requests: Sequence[tuple[Messages, int]], seed: int | None, answers: bool = False, start: int = 0
) -> list[torch.Generator | None]:
    """One CPU generator per sampled row, samples ``start`` to ``start + k - 1`` of each request, seeded by
    ``sample_seed`` (from the OS when seed is None); with ``answers``, each request's k rows are followed by a
    greedy row (None)."""
    gens: list[torch.Generator | None] = []
    for messages, k in requests:
        for i in range(start, start + k):
            g = torch.Generator()
            if seed is None:
                g.seed()
            else:
                g.manual_seed(sample_seed(seed, messages, i))
            gens.append(g)
        if answers:
            gens.append(None)
    return gens


class LocalSampler(BatchSampler):
    """Samples from the model of a teacher, so that the teacher can reuse the exact token ids."""

    name = "transformers"

    def __init__(self, teacher: HFTeacher) -> None:
        self.teacher = teacher
        self.decoded = 0  # row-steps decoded (tokens fed back), over every call: finished rows cost none

    def _stop_ids(self) -> set[int]:
        """Token ids that end a response (EOS / end of turn)."""
        eos = self.teacher.model.generation_config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.teacher.tokenizer.eos_token_id is not None:
            ids.add(self.teacher.tokenizer.eos_token_id)
        return ids

    def pad_id(self) -> int:
        """The id that pads prompts: the tokenizer's pad token, else the lowest stop id."""
        pad = self.teacher.tokenizer.pad_token_id
        return pad if pad is not None else min(self._stop_ids(), default=0)

    def samples(self, rows: Sequence[Sequence[int]]) -> list[Sample]:
        """Generated token rows as Samples, each cut before its first stop token."""
        stop, out = self._stop_ids(), []
        for row in rows:
            cut = next((i for i, t in enumerate(row) if t in stop), len(row))
            token_ids = tuple(row[:cut])
            out.append(
                Sample(
                    text=self.teacher.tokenizer.decode(token_ids, skip_special_tokens=True),
                    token_ids=token_ids,
                    finish_reason="stop" if cut < len(row) else "length",
                )
            )
        return out

    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt."""
        return self.sample_many([(messages, params.k)], params)[0]

    @torch.inference_mode()
    def sample_many(
        self, requests: Sequence[tuple[Messages, int]], params: SamplingParams, answers: bool = False
    ) -> list[SampleSet]:
        """``k`` samples for each (messages, k), all decoded together, one token a step for the rows still going.

        The prompts are read once (the tokens they share at their start once for them all, or not again
        when the teacher's ``memo`` holds them) and every row attends to them in place
        (``teachers.prefix``); a row that draws a stop token leaves the batch. Sample i of a prompt is
        drawn with its own generator seeded from (``params.seed``, the messages, i), so a prompt's
        samples do not depend on the other prompts of the call, their order or the grouping (up to
        float rounding of differently shaped batches); the global RNG is untouched. With ``answers``,
        each prompt also gets its greedy answer (its most likely token at every step, as at
        temperature 0) as one more row: ``SampleSet.answer``.
        """
        device = self.teacher.device
        run = decoder_pass(self.teacher.model)
        prompts = [self.teacher.prompt_ids(m) for m, _ in requests]
        prefix, last = read_prompts(prompts, self.pad_id(), device, run, self.teacher.memo)
        width = [k + answers for _, k in requests]
        index = torch.tensor([n for n, w in enumerate(width) for _ in range(w)], device=device)
        gens = (
            row_generators(requests, params.seed, answers, params.start)
            if params.temperature > 0
            else [None] * len(index)
        )
        drawn = iter(self.samples(self._decode(prefix, self.teacher.logits(last), index, gens, params)))
        sets = []
        for _, k in requests:
            samples = [next(drawn) for _ in range(k)]
            sets.append(SampleSet(samples, answer=next(drawn) if answers else None))
        return sets

    def _decode(
        self,
        prefix: Prefix,
        logits: torch.Tensor,
        index: torch.Tensor,
        gens: Sequence[torch.Generator | None],
        params: SamplingParams,
    ) -> list[list[int]]:
        """Token rows after prompts ``index`` (R,), given each prompt's next-token ``logits``: up to
        ``params.max_tokens`` each, a row ending at its first stop token."""
        run, device = decoder_pass(self.teacher.model), logits.device
        stop = torch.tensor(sorted(self._stop_ids()), dtype=torch.long, device=device)
        levels = prefix.continuation(index)
        live = torch.arange(len(index), device=device)
        start = prefix.lengths[index]  # position of each row's first drawn token
        rows: list[list[int]] = [[] for _ in range(len(index))]
        scores = logits[index]
        for step in range(params.max_tokens):
            tokens = self._pick(scores, [gens[r] for r in live.tolist()], params, stop if step == 0 else None)
            for r, t in zip(live.tolist(), tokens.tolist(), strict=True):
                rows[r].append(t)
            going = ~torch.isin(tokens, stop)
            if step == params.max_tokens - 1 or not going.any():
                break
            if not going.all():  # finished rows leave the batch
                keep = going.nonzero()[:, 0]
                live, tokens, start = live[keep], tokens[keep], start[keep]
                levels.keep(keep)
            pos = (start + step)[:, None]
            valid = torch.ones_like(pos, dtype=torch.bool)
            levels.step(pos, valid)
            scores = self.teacher.logits(run(tokens[:, None], valid, pos, levels)[:, -1])
            self.decoded += len(live)
        return rows

    @staticmethod
    def _pick(
        scores: torch.Tensor,
        gens: Sequence[torch.Generator | None],
        params: SamplingParams,
        banned: torch.Tensor | None,
    ) -> torch.Tensor:
        """Each row's next token: ``banned`` ids excluded (no stop as the first token), then temperature,
        top-p and the per-row draw; the most likely token at temperature 0."""
        if banned is not None:
            scores = scores.index_fill(1, banned, float("-inf"))
        if params.temperature <= 0:
            return scores.argmax(dim=-1)
        scores = scores / params.temperature
        if params.top_p < 1.0:
            scores = TopPLogitsWarper(params.top_p)(None, scores)
        return draw_tokens(scores, gens)
