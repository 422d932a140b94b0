"""White-box sampling: K responses from a local transformers model with its own chat template."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams
from blackbox_wd.sampling import BatchSampler
from blackbox_wd.teachers.hf import HFTeacher
from blackbox_wd.teachers.prefix import left_padded, new_cache, positions, select_rows


def sample_seed(seed: int, messages: Messages, index: int) -> int:
    """The seed of sample ``index`` of a prompt: a hash of (seed, messages, index), whatever else is drawn."""
    payload = json.dumps([seed, messages, index], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(payload.encode()).digest()[:8], "big") >> 1


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
        self.sampled = [r for r, g in enumerate(self.generators) if g is not None]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Scores with +inf at the drawn token of each row (others unchanged, all below it)."""
        drawn = scores.argmax(dim=-1, keepdim=True)
        if self.sampled:
            rows = torch.tensor(self.sampled, device=scores.device)
            cdf = torch.softmax(scores[rows], dim=-1).double().cumsum_(dim=-1)
            u = torch.cat([torch.rand(1, generator=self.generators[r], dtype=torch.float64) for r in self.sampled])
            drawn[rows] = torch.searchsorted(cdf, u[:, None].to(cdf.device) * cdf[:, -1:], right=True)
        return scores.scatter_(1, drawn.clamp_(max=scores.shape[-1] - 1), float("inf"))


def row_generators(requests: Sequence[tuple[Messages, int]], seed: int | None,
                   answers: bool = False) -> list[torch.Generator | None]:
    """One CPU generator per sampled row, seeded by ``sample_seed`` (from the OS when seed is None);
    with ``answers``, each request's k rows are followed by a greedy row (None)."""
    gens: list[torch.Generator | None] = []
    for messages, k in requests:
        for i in range(k):
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
            out.append(Sample(text=self.teacher.tokenizer.decode(token_ids, skip_special_tokens=True),
                              token_ids=token_ids, finish_reason="stop" if cut < len(row) else "length"))
        return out

    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt."""
        return self.sample_many([(messages, params.k)], params)[0]

    @torch.inference_mode()
    def sample_many(self, requests: Sequence[tuple[Messages, int]], params: SamplingParams,
                    answers: bool = False) -> list[SampleSet]:
        """``k`` samples for each (messages, k), all in one left-padded ``generate`` call.

        Each prompt is read once: all but its last token run in one batch whose key/value cache is
        then copied to the prompt's rows, and ``generate`` goes on from there (``teachers.prefix``).
        Sample i of a prompt is drawn with its own generator seeded from (``params.seed``, the
        messages, i), so a prompt's samples do not depend on the other prompts of the call, their
        order or the grouping (up to float rounding of padded batches); the global RNG is untouched.
        With ``answers``, each prompt also gets its greedy answer (its most likely token at every
        step, as at temperature 0) as one more row of the same call: ``SampleSet.answer``.
        """
        pad = self.pad_id()
        model, device = self.teacher.model, self.teacher.device
        ids, mask = left_padded([self.teacher.prompt_ids(m) for m, _ in requests], pad, device)
        cache = new_cache(model)
        if ids.shape[1] > 1:  # the last column goes through generate, which needs one new token a row
            model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions(mask[:, :-1]),
                  past_key_values=cache, use_cache=True, logits_to_keep=1)
        width = [k + answers for _, k in requests]
        rows = torch.tensor([n for n, w in enumerate(width) for _ in range(w)], device=device)
        draw = LogitsProcessorList()
        if params.temperature > 0:
            draw.append(TemperatureLogitsWarper(params.temperature))
            if params.top_p < 1.0:
                draw.append(TopPLogitsWarper(params.top_p))
            draw.append(InverseCDFDraw(row_generators(requests, params.seed, answers)))
        out = model.generate(
            ids[rows], attention_mask=mask[rows], past_key_values=select_rows(cache, rows), do_sample=False,
            logits_processor=draw, temperature=None, top_p=None, top_k=None, max_new_tokens=params.max_tokens,
            min_new_tokens=1, pad_token_id=pad,
        )
        drawn = iter(self.samples(out[:, ids.shape[1]:].tolist()))
        sets = []
        for _, k in requests:
            samples = [next(drawn) for _ in range(k)]
            sets.append(SampleSet(samples, answer=next(drawn) if answers else None))
        return sets
