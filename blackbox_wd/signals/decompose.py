"""Claims from the target (``--claims target``, ``Settings.claims``): the target lists the judged answer's atomic
claims, in every door that has a target: ``score`` and the Python API (:func:`decompose`), ``batch`` on both
engines and ``serve`` (:func:`list_claims`).

One request per answer, through the run's own sampler (so it is cached, retried, recorded and replayed like every
sample), at temperature 0, with a FActScore-style prompt (``PROMPT``, written out in docs/claims.md). Each line of
the reply that starts with a list mark is a claim (``parse_claims``). A claim the reply leaves empty gets
its own error when scored (``claims.score_claims``), not the record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from blackbox_wd.clients.sampling import Draw, Sampler
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Messages, SamplingParams, Usage

PROMPT = (
    "Please break down the following passage into independent facts. Write each fact as one short sentence that "
    'can be understood on its own, on its own line starting with "- ". Write nothing else.\n\n'
    "Passage: {answer}"
)
MAX_CLAIM_TOKENS = 512  # room for the claims of a long answer (a FActScore bio has about 30)
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


def claim_params(seed: int | None) -> SamplingParams:
    """The decomposition request's sampling: one reply, at temperature 0, with room for a long answer's claims."""
    return SamplingParams(k=1, temperature=0.0, top_p=1.0, max_tokens=MAX_CLAIM_TOKENS, seed=seed)


async def list_claims(
    draw: Draw, answers: Sequence[str], seed: int | None = 0
) -> list[tuple[tuple[str, ...], Usage] | BBWDError]:
    """Each answer's claims as the target lists them, with what its request cost, or why it failed: one request per
    answer, all in one ``draw`` (concurrent API calls, or one batch for a local target).

    Parameters
    ----------
    draw : Draw
        The run's draw (``rounds.sampler_draw`` of its sampler).
    answers : sequence of str
        The judged answers.
    seed : int or None, default=0
        The requests' seed (the run's).

    Returns
    -------
    list of (claims, usage) or BBWDError
        In the order of ``answers``.
    """
    got = await draw([(decompose_messages(a), 1) for a in answers], claim_params(seed))
    return [g if isinstance(g, BBWDError) else (parse_claims(g.samples[0].text), g.usage) for g in got]


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
    drawn = sampler.sample(decompose_messages(answer), claim_params(seed))
    return parse_claims(drawn.samples[0].text), drawn.usage
