"""Which fact is wrong: each claim's support among the samples, by its key words.

A long answer is judged claim by claim. A claim's **key words** are its distinct lower-cased words that are not
function words (``FUNCTION_WORDS``) nor words of the prompt, kept where the judged answer has them (unless that
leaves none). A claim's score is its ``lex_share``: the share of samples that do not state every one of its key
words (0 for a claim with no key word: nothing to find missing). Higher = more likely unsupported.

**What the doors score** (:func:`score_claims`): each claim's ``score`` is its ``lex_share``; a calibration's claim
head (``Calibration.claim``) reads it with the answer's AvgWD (``CLAIM_MEMBERS``) and gives the claim its p and
flag. That head was chosen by the second rule of bench/RESULTS.md, "Claim scores"; it needs no teacher pass of the
claims, so a claim costs its words only. The other members measured there (transport of the claim's token states
onto each sample, other lexical shares) are in docs/results-notebook.md; their code was removed after commit
ba868a2.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from blackbox_wd.signals.lexical import words

# English function words: articles, pronouns, auxiliaries, prepositions, conjunctions, a few adverbs. Fixed before
# any claim was scored (bench/RESULTS.md, "Claim scores"); not tuned.
_FUNCTION_WORDS = """
    a an the this that these those some any each every all both either neither no other such own same
    i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
    who whom whose which what where when why how whoever whatever
    be is am are was were been being have has had having do does did doing done
    will would shall should can could may might must ought
    of in on at by for with about against between into through during before after above below to from
    up down out off over under again further then once here there near within without along across
    behind beyond upon toward towards among around throughout via per than as like since until till
    and or but nor so yet if because while although though whether unless also too very just only even
    not s t d ll m re ve more most much many few less least several quite rather well
"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())


def key_words(claim: str, answer: str, prompt: str) -> list[str]:
    """The claim's key words: its distinct words (``lexical.words``, in order) that are not function words nor words
    of the prompt, kept where the judged answer has them unless none is.

    Examples
    --------
    >>> key_words("Bob was born in Paris in 1950.", "He was born in Paris in 1950.", "Tell me about Bob.")
    ['born', 'paris', '1950']
    >>> key_words("The painter lived in Rome.", "He lived in Rome.", "Tell me about Bob.")
    ['lived', 'rome']
    """
    drop = FUNCTION_WORDS | set(words(prompt))
    own = list(dict.fromkeys(w for w in words(claim) if w not in drop))
    said = set(words(answer))
    kept = [w for w in own if w in said]
    return kept or own


def presence(keys: Sequence[str], samples: Sequence[set[str]]) -> np.ndarray:
    """(len(keys), K) booleans: sample k holds key word w (``samples``: each sample's set of words)."""
    return np.array([[w in s for s in samples] for w in keys], dtype=bool).reshape(len(keys), len(samples))


def lex_shares(claims: Sequence[str], samples: Sequence[str], answer: str, prompt: str) -> np.ndarray:
    """Each claim's ``lex_share``: the share of samples that lack one of its key words (0 with no key word).

    Parameters
    ----------
    claims : sequence of n str
        The judged answer's claims.
    samples : sequence of K str
        The sampled responses.
    answer : str
        The judged answer (its words pick the claim's key words).
    prompt : str
        The prompt's text (its words are not key words).

    Returns
    -------
    ndarray of shape (n,)
        One share per claim, in the order of ``claims``.

    Examples
    --------
    >>> lex_shares(["Bob was born in Paris."], ["Bob, born in Paris.", "Bob: born in Lyon."], "", "").tolist()
    [0.5]
    """
    sets = [set(words(s)) for s in samples]
    out = np.zeros(len(claims))
    for i, claim in enumerate(claims):
        keys = key_words(claim, answer, prompt)
        if keys and sets:
            out[i] = 1.0 - presence(keys, sets).all(axis=0).mean()
    return out


@dataclass
class ClaimScore:
    """A claim about the judged answer and its score (``lex_share``); None with its ``error`` when it cannot be read."""

    text: str
    score: float | None
    p_hallucination: float | None = None  # with a calibration's claim head: its probability
    flag: bool | None = None  # with a calibration's claim head: p_hallucination reaches its threshold
    error: str | None = None  # why the claim has no score (the other claims keep theirs)


def claim_dicts(claims: Sequence[ClaimScore] | None) -> list[dict[str, Any]] | None:
    """Scored claims as JSON objects ``{"text", "score", "p_hallucination", "flag"}``, with ``error`` only where a
    claim has one (None stays None)."""
    if claims is None:
        return None
    return [{k: v for k, v in asdict(c).items() if k != "error" or v is not None} for c in claims]


def read_claims(value: Any, field: str = "claims") -> tuple[str, ...]:
    """A record's claims as texts: a list of strings, or of objects with a string ``text`` (other keys, such as a
    ``label``, are not read here); ValueError naming the field and the claim otherwise. An empty claim is kept
    (:func:`score_claims` gives it its own error).

    Examples
    --------
    >>> read_claims(["Bob was born in Paris.", {"text": "He painted.", "label": "supported"}])
    ('Bob was born in Paris.', 'He painted.')
    >>> read_claims("Bob was born in Paris.")
    Traceback (most recent call last):
    ...
    ValueError: 'claims' must be a list of strings or of objects with 'text' (got str)
    """
    if not isinstance(value, list):
        raise ValueError(f"'{field}' must be a list of strings or of objects with 'text' (got {type(value).__name__})")
    out = []
    for i, claim in enumerate(value):
        text = claim.get("text") if isinstance(claim, dict) else claim
        if not isinstance(text, str):
            raise ValueError(f"'{field}' item {i} must be a string or an object with a string 'text'")
        out.append(text)
    return tuple(out)


def score_claims(claims: Sequence[str], samples: Sequence[str], answer: str, prompt: str) -> list[ClaimScore]:
    """Each claim's score: its ``lex_share`` among the samples (the share of samples that lack one of its key words),
    or an error for an empty claim, which does not stop the others.

    Parameters
    ----------
    claims : sequence of str
        Statements about the judged answer (they need not be spans of it).
    samples : sequence of K str
        The sampled responses.
    answer : str
        The judged answer ("" when there is none: a claim then keeps all its key words).
    prompt : str
        The prompt's text (its words are not key words).

    Returns
    -------
    list of ClaimScore
        In the order of ``claims``.

    Examples
    --------
    >>> [c.score for c in score_claims(["Bob was born in Paris."], ["Bob, born in Paris.", "Bob: born in Lyon."],
    ...                                 "Bob was born in Paris.", "Who is Bob?")]
    [0.5]
    >>> score_claims(["  "], ["a", "b"], "", "")[0].error
    'claim 0 is empty'
    """
    texts = [c.strip() for c in claims]
    kept = [i for i, t in enumerate(texts) if t]
    shares = lex_shares([texts[i] for i in kept], samples, answer, prompt)
    share = dict(zip(kept, shares.tolist(), strict=True))
    return [
        ClaimScore(claims[i], share[i]) if i in share else ClaimScore(claims[i], None, error=f"claim {i} is empty")
        for i in range(len(claims))
    ]
