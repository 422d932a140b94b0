"""DSE's entailment checks that run a model or a solver: ``final_answer_entails`` (math-verify) and
``TeacherEntailment`` (the teacher LM, torch). Apart from ``dse`` so that a run that checks by exact match
(``bbwd score``, the calibration's members) imports neither (``tests/test_startup.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from blackbox_wd.signals.answers.mathcheck import same_final_answer
from blackbox_wd.teachers.pad import pad_batch

YES_WORDS = ("yes", "Yes", " yes", " Yes", "YES")
NO_WORDS = ("no", "No", " no", " No", "NO")


def final_answer_entails(premise: str, hypothesis: str) -> bool:
    """Entailment for math: two solutions mean the same when their final answers are equivalent.

    The final answer is the last ``\\boxed{}`` first (math-verify's extraction), compared by
    ``answers.mathcheck.same_final_answer``; a solution without one means the same only as an equal string.
    """
    return same_final_answer(premise, hypothesis)


def entailment_prompt(premise: str, hypothesis: str, question: str | None = None) -> str:
    """The yes/no question put to the teacher LM."""
    head = f'We are evaluating answers to the question "{question}".\n' if question else ""
    return (
        f"{head}Answer A: {premise}\nAnswer B: {hypothesis}\n"
        "Does Answer A entail Answer B, that is, if Answer A is true, must Answer B also be true? "
        "Reply with yes or no only."
    )


class TeacherEntailment:
    """Entailment check by a causal LM teacher (``HFTeacher``: ``.model``, ``.tokenizer``,
    ``.prompt_ids(messages)``): yes when the yes-token logits beat the no-token logits.

    Results are cached per (premise, hypothesis); make one per question. ``threshold``
    (default 0: yes more likely than no) is the margin above which it says yes. Only
    yes/no spellings that are a single token of the teacher's tokenizer are used.

    It is only as good as its LM: the embedded SmolLM2-135M answers "no" to nearly every
    pair (margin about -0.8 even for "Paris" vs "Paris"), so DSE with it degenerates towards ln K;
    use an instruction-tuned teacher of a few billion parameters for a meaningful DSE.
    """

    def __init__(self, teacher: Any, question: str | None = None, threshold: float = 0.0) -> None:
        self.teacher = teacher
        self.question = question
        self.threshold = threshold
        yes, no = self._first_tokens(YES_WORDS), self._first_tokens(NO_WORDS)
        unk = getattr(teacher.tokenizer, "unk_token_id", None)
        drop = (set(yes) & set(no)) | ({unk} if unk is not None else set())
        self.yes_ids = [t for t in yes if t not in drop]
        self.no_ids = [t for t in no if t not in drop]
        if not self.yes_ids or not self.no_ids:
            raise ValueError("the teacher's tokenizer has no distinct yes / no tokens")
        self.cache: dict[tuple[str, str], float] = {}
        self.calls = 0

    def _first_tokens(self, words: Sequence[str]) -> list[int]:
        """Ids of the words that are one token each (a split word's first piece, e.g. "Y", is no answer)."""
        out: list[int] = []
        for w in words:
            ids = self.teacher.tokenizer.encode(w, add_special_tokens=False)
            if len(ids) == 1 and ids[0] not in out:
                out.append(int(ids[0]))
        return out

    def margin(self, premise: str, hypothesis: str) -> float:
        """logsumexp(yes logits) - logsumexp(no logits) at the first reply position."""
        self.prefetch([(premise, hypothesis)])
        return self.cache[(premise, hypothesis)]

    def prefetch(self, pairs: Sequence[tuple[str, str]], batch_size: int = 16) -> None:
        """Margins of (premise, hypothesis) pairs not yet cached, in left-padded batched forwards."""
        todo = list(dict.fromkeys(p for p in pairs if p not in self.cache))
        pad = getattr(self.teacher.tokenizer, "pad_token_id", None) or 0
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            seqs = [
                self.teacher.prompt_ids([{"role": "user", "content": entailment_prompt(a, b, self.question)}])
                for a, b in chunk
            ]
            ids, mask = pad_batch(seqs, pad, left=True)
            positions = (mask.cumsum(1) - 1).clamp(min=0)
            dev = self.teacher.device
            with torch.inference_mode():
                logits = (
                    self.teacher.model(
                        input_ids=ids.to(dev),
                        attention_mask=mask.to(dev),
                        position_ids=positions.to(dev),
                        logits_to_keep=1,
                    )
                    .logits[:, -1]
                    .float()
                )
            margins = torch.logsumexp(logits[:, self.yes_ids], 1) - torch.logsumexp(logits[:, self.no_ids], 1)
            for pair, m in zip(chunk, margins.tolist(), strict=True):
                self.cache[pair] = m
            self.calls += len(chunk)

    def __call__(self, premise: str, hypothesis: str) -> bool:
        return self.margin(premise, hypothesis) > self.threshold
