"""White-box sampling: K responses from a local transformers model with its own chat template."""

from __future__ import annotations

import torch

from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams
from blackbox_wd.teachers.hf import HFTeacher


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

    @torch.inference_mode()
    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples in one batched ``generate`` call, seeded without touching the global RNG."""
        model, tok = self.teacher.model, self.teacher.tokenizer
        prompt = torch.tensor([self.teacher.prompt_ids(messages)], device=self.teacher.device)
        stop = self._stop_ids()
        greedy = params.temperature <= 0
        with torch.random.fork_rng(devices=[model.device] if model.device.type == "cuda" else []):
            if params.seed is not None:
                torch.manual_seed(params.seed)
            out = model.generate(
                prompt, attention_mask=torch.ones_like(prompt), do_sample=not greedy,
                temperature=None if greedy else params.temperature, top_p=None if greedy else params.top_p,
                top_k=None if greedy else 0, max_new_tokens=params.max_tokens, min_new_tokens=1,
                num_return_sequences=params.k, pad_token_id=tok.pad_token_id or min(stop, default=0),
            )
        samples = []
        for row in out[:, prompt.shape[1]:].tolist():
            cut = next((i for i, t in enumerate(row) if t in stop), len(row))
            ids = tuple(row[:cut])
            reason = "stop" if cut < len(row) else "length"
            samples.append(Sample(text=tok.decode(ids, skip_special_tokens=True), token_ids=ids, finish_reason=reason))
        return SampleSet(samples)
