"""White-box sampling: K responses from a local transformers model with its own chat template."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams
from blackbox_wd.teachers.hf import HFTeacher, pad_batch


class LocalSampler:
    """Samples from the model of a teacher, so that the teacher can reuse the exact token ids."""

    def __init__(self, teacher: HFTeacher) -> None:
        self.teacher = teacher

    def _stop_ids(self) -> set[int]:
        """Token ids that end a response (EOS / end of turn)."""
        eos = self.teacher.model.generation_config.eos_token_id
        ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.teacher.tokenizer.eos_token_id is not None:
            ids.add(self.teacher.tokenizer.eos_token_id)
        return ids

    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt."""
        return self.sample_many([(messages, params.k)], params)[0]

    @torch.inference_mode()
    def sample_many(self, requests: Sequence[tuple[Messages, int]], params: SamplingParams) -> list[SampleSet]:
        """``k`` samples for each (messages, k), all in one left-padded ``generate`` call.

        Seeded from ``params.seed`` without touching the global RNG; the draw depends on the whole
        request list, so the same list gives the same samples.
        """
        model, tok = self.teacher.model, self.teacher.tokenizer
        stop = self._stop_ids()
        pad = tok.pad_token_id if tok.pad_token_id is not None else min(stop, default=0)
        ids, mask = pad_batch([self.teacher.prompt_ids(m) for m, k in requests for _ in range(k)], pad, left=True)
        width = ids.shape[1]
        greedy = params.temperature <= 0
        device = self.teacher.device
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            if params.seed is not None:
                torch.manual_seed(params.seed)
            out = model.generate(
                ids.to(device), attention_mask=mask.to(device), do_sample=not greedy,
                temperature=None if greedy else params.temperature, top_p=None if greedy else params.top_p,
                top_k=None if greedy else 0, max_new_tokens=params.max_tokens, min_new_tokens=1,
                pad_token_id=pad,
            )
        rows = iter(out[:, width:].tolist())
        results = []
        for _, k in requests:
            samples = []
            for row in (next(rows) for _ in range(k)):
                cut = next((i for i, t in enumerate(row) if t in stop), len(row))
                token_ids = tuple(row[:cut])
                samples.append(Sample(text=tok.decode(token_ids, skip_special_tokens=True), token_ids=token_ids,
                                      finish_reason="stop" if cut < len(row) else "length"))
            results.append(SampleSet(samples))
        return results
