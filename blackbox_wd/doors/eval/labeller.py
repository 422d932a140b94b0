"""Optional LLM label (``--judge``, the row's ``label_judge``): an API model says whether the judged answer
(``eval.run``) is correct.

The labeller sees the question, the reference answers and the response, and is asked for yes/no at
temperature 0 (one sample, through the same client layer: cache, retries, record/replay). A reply
starting with "yes" labels the prompt 0 (correct), "no" labels it 1 (hallucination); anything
else leaves the label missing, and summary.md counts only prompts the labeller labelled.
"""

from __future__ import annotations

from collections.abc import Sequence

from blackbox_wd.records import SamplingParams

LABEL_PROMPT = (
    "Question: {question}\nReference answer(s): {answers}\nProposed answer: {response}\n"
    "Is the proposed answer correct, i.e. does it agree with a reference answer? "
    "Reply with yes or no only."
)
LABEL_PARAMS = SamplingParams(k=1, temperature=0.0, top_p=1.0, max_tokens=4, seed=0)


def parse_label(text: str) -> int | None:
    """1 (hallucination) for a 'no', 0 for a 'yes', None for anything else."""
    word = text.strip().lstrip("*\"'").lower()
    if word.startswith("yes"):
        return 0
    if word.startswith("no"):
        return 1
    return None


class LLMLabeller:
    """Labels responses with a chat model reached through an API sampler."""

    def __init__(self, sampler) -> None:  # noqa: ANN001 - an APISampler
        self.sampler = sampler

    def label(self, question: str, answers: Sequence[str], response: str) -> int | None:
        """The label of one response, or None when its reply is not yes/no."""
        prompt = LABEL_PROMPT.format(question=question, answers=" | ".join(answers), response=response)
        reply = self.sampler.sample([{"role": "user", "content": prompt}], LABEL_PARAMS).samples[0].text
        return parse_label(reply)
