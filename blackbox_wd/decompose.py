"""Claims from the target (``--claims target``): the target lists the judged answer's atomic claims (#47).

One request per answer, through the run's own sampler (so it is cached, retried, recorded and replayed like every
sample), at temperature 0, with a FActScore-style prompt (``PROMPT``, written out in docs/claims.md). Each line of
the reply that starts with a list mark is a claim (``parse_claims``). A claim the reply leaves empty gets
its own error when scored (``claims.score_claims``), not the record.
"""

from __future__ import annotations

import re

from blackbox_wd.records import Messages, SamplingParams, Usage
from blackbox_wd.sampling import Sampler

PROMPT = (
    "Please break down the following passage into independent facts. Write each fact as one short sentence that "
    'can be understood on its own, on its own line starting with "- ". Write nothing else.\n\n'
    "Passage: {answer}"
)
MAX_TOKENS = 512  # room for the claims of a long answer (a FActScore bio has about 30)
_MARK = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")  # "- ", "* ", "• ", "1. ", "1) "


def decompose_messages(answer: str) -> Messages:
    """The request that asks the target for the answer's claims."""
    return [{"role": "user", "content": PROMPT.format(answer=answer)}]


def parse_claims(text: str) -> tuple[str, ...]:
    """The claims of the target's reply: each line that starts with a list mark, the mark removed; in a reply with
    no list mark (a target that wrote one fact a line without them), each line that is not blank.

    Examples
    --------
    >>> parse_claims("Here are the facts:\\n- Ada was born in 1815.\\n2. She wrote notes.\\n-\\n")
    ('Ada was born in 1815.', 'She wrote notes.', '')
    >>> parse_claims("Ada was born in 1815.\\n\\nShe wrote notes.")
    ('Ada was born in 1815.', 'She wrote notes.')
    """
    lines = text.splitlines()
    if any(_MARK.match(line) for line in lines):
        return tuple(_MARK.sub("", line).strip() for line in lines if _MARK.match(line))
    return tuple(line.strip() for line in lines if line.strip())


def decompose(sampler: Sampler, answer: str, seed: int | None = 0) -> tuple[tuple[str, ...], Usage]:
    """The answer's claims as the target lists them, and what the request cost.

    Parameters
    ----------
    sampler : Sampler
        The run's target (an API's, or a local model's).
    answer : str
        The judged answer.
    seed : int or None, default=0
        The request's seed (the run's): the same answer gets the same claims where the target honours it.

    Returns
    -------
    claims : tuple of str
        In the reply's order; empty when the reply lists none.
    usage : Usage
        The request's tokens, and whether it came from the cache.
    """
    params = SamplingParams(k=1, temperature=0.0, top_p=1.0, max_tokens=MAX_TOKENS, seed=seed)
    drawn = sampler.sample(decompose_messages(answer), params)
    return parse_claims(drawn.samples[0].text), drawn.usage
