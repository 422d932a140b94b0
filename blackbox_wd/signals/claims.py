"""Which fact is wrong: claim-support members from the teacher's token states and the texts (#47).

A long answer is judged claim by claim. Each claim (a short statement taken from the judged answer) is forced
through the teacher as a response to the same prompt, as the K samples and the judged answer are; its m token
states are compared with each sample's cloud of states. A sample supports a claim while saying much more than it,
so the full W2 between the claim and a sample (which must also explain the sample's other tokens) is the wrong
measure; the members move the claim's mass onto a part of each sample only:

    ot_nearest     mean_k sqrt( mean_t min_j C(t, j) )          free target marginal: each claim token to its
                                                                nearest token of sample k (unbalanced OT's limit)
    ot_partial     mean_k sqrt( partial W2, capacity 1/m )      the claim's whole mass, each sample token taking
                                                                at most 1/m: a rectangular assignment
    ot_gap         ot_nearest - sqrt( nearest cost to the judged answer, which states the claim )

with C the squared-Euclidean cost. Lexically, a claim's **key words** are its distinct lower-cased words that are
not function words (``FUNCTION_WORDS``) nor words of the prompt, kept where the judged answer has them (unless that
leaves none). With P(w, k) = 1 when sample k holds key word w:

    lex_absent     mean_{w, k} (1 - P)              the share of key words a sample lacks, averaged over samples
    lex_rarest     max_w mean_k (1 - P)             the rarest key word: the share of samples without it
    lex_share      mean_k [ not all_w P(w, k) ]     the share of samples that do not state every key word
    support_share  mean_k [ not (all_w P(w, k) or nearest_k <= nearest to the answer) ]
    unigram        SelfCheck-Unigram(max) of the claim's words over the samples and the answer (``lexical``)

Every member is "higher = more likely unsupported". A claim with no key word has 0 for ``lex_absent``,
``lex_rarest`` and ``lex_share`` (nothing to find missing) and its support is the OT test alone.

**What the doors score** (:func:`score_claims`): each claim's ``score`` is its ``lex_share``; a calibration's claim
head (``Calibration.claim``) reads it with the answer's AvgWD (``CLAIM_MEMBERS``) and gives the claim its p and
flag. That head was chosen by the second rule of bench/RESULTS.md, "Claim scores (#47)"; it needs no teacher pass
of the claims, so a claim costs its words only. The OT members above are the study's, not a door's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.transport import check_clouds
from blackbox_wd.signals.lexical import unigram_surprise, words

MEMBERS = ("ot_nearest", "ot_partial", "ot_gap", "lex_absent", "lex_rarest", "lex_share", "support_share", "unigram")

# English function words: articles, pronouns, auxiliaries, prepositions, conjunctions, a few adverbs. Fixed before
# any claim was scored (bench/RESULTS.md, "Claim scores (#47)"); not tuned.
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


Costs = tuple[np.ndarray, np.ndarray, np.ndarray]  # the cost matrix, the claims' row offsets, the clouds' columns'


def cost_matrix(claims: Sequence[np.ndarray], clouds: Sequence[np.ndarray]) -> Costs:
    """The squared-Euclidean cost between every claim token and every cloud token, and both sets of row offsets.

    Parameters
    ----------
    claims : sequence of n array-like of shape (m_i, dim)
        The claims' token states.
    clouds : sequence of K array-like of shape (s_k, dim)
        The samples' token states (or any clouds: the judged answer's).

    Returns
    -------
    cost : ndarray of shape (sum m_i, sum s_k), float64
        ``||x - y||^2`` on points centred on their common mean, clipped at 0.
    claim_starts : ndarray of shape (n + 1,)
        Row offsets: claim i's tokens are rows ``claim_starts[i]:claim_starts[i + 1]``.
    cloud_starts : ndarray of shape (K + 1,)
        Column offsets of the clouds.

    Raises
    ------
    BBWDError
        A claim or cloud is empty or not 2-d, or the dimensions differ.
    """
    if not claims or not clouds:
        raise BBWDError("need at least one claim and one cloud")
    check_clouds(claims, "claim")
    check_clouds(clouds, "cloud")
    if np.shape(claims[0])[1] != np.shape(clouds[0])[1]:
        raise BBWDError(f"claims have dimension {np.shape(claims[0])[1]}, clouds {np.shape(clouds[0])[1]}")
    x = np.concatenate(claims, dtype=np.float64)
    y = np.concatenate(clouds, dtype=np.float64)
    centre = np.concatenate([x, y]).mean(axis=0)
    x -= centre
    y -= centre
    cost = x @ y.T
    cost *= -2.0
    cost += np.einsum("ij,ij->i", x, x)[:, None]
    cost += np.einsum("ij,ij->i", y, y)[None, :]
    np.maximum(cost, 0.0, out=cost)
    return cost, np.cumsum([0] + [len(c) for c in claims]), np.cumsum([0] + [len(c) for c in clouds])


def nearest_costs(claims: Sequence[np.ndarray], clouds: Sequence[np.ndarray]) -> np.ndarray:
    """Each claim's mean nearest-neighbour cost in each cloud: unbalanced OT with a free target marginal.

    Entry (i, k) is ``mean_t min_j C(t, j)`` over claim i's tokens t and cloud k's tokens j, in squared-distance
    units: the cost of moving the claim's uniform mass onto cloud k when cloud k may receive any amount anywhere.
    A claim whose every token is a token of cloud k costs 0 to it, whatever else cloud k holds.

    Parameters
    ----------
    claims : sequence of n array-like of shape (m_i, dim)
    clouds : sequence of K array-like of shape (s_k, dim)

    Returns
    -------
    ndarray of shape (n, K), float64

    Examples
    --------
    >>> claim = np.array([[0.0, 0.0], [2.0, 0.0]])
    >>> nearest_costs([claim], [np.array([[0.0, 1.0], [2.0, 0.0], [9.0, 9.0]])]).round(9).tolist()  # (1 + 0) / 2
    [[0.5]]
    """
    cost, rows, cols = cost_matrix(claims, clouds)
    per_token = np.minimum.reduceat(cost, cols[:-1], axis=1)  # (tokens, K)
    return np.add.reduceat(per_token, rows[:-1], axis=0) / np.diff(rows)[:, None]


def partial_costs(claims: Sequence[np.ndarray], clouds: Sequence[np.ndarray]) -> np.ndarray:
    """Each claim's partial transport cost onto each cloud: all of its mass, each cloud token taking at most 1/m.

    Entry (i, k) is the optimal cost of moving claim i's uniform mass (1/m on each of its m tokens) onto cloud k
    where each of the cloud's s_k tokens can take at most 1/m (``ot.partial.partial_wasserstein(a, b, C, m=1)``
    with a = b = 1/m): the plan's vertices are assignments, so it is the mean cost of the optimal injective
    assignment of the claim's tokens to the cloud's (``scipy.optimize.linear_sum_assignment``, exact). When the
    cloud has fewer tokens than the claim it cannot take the mass that way, and the entry is the full EMD2
    between the two uniform measures (POT's network simplex). Parameters and shape as :func:`nearest_costs`; always
    at least its entries.

    Examples
    --------
    >>> claim = np.array([[0.0, 0.0], [0.1, 0.0]])  # both tokens' nearest point is the origin: one must go further
    >>> partial_costs([claim], [np.array([[0.0, 0.0], [1.0, 0.0]])]).round(6).tolist()  # (0 + 0.81) / 2
    [[0.405]]
    """
    cost, rows, cols = cost_matrix(claims, clouds)
    out = np.empty((len(rows) - 1, len(cols) - 1))
    for i in range(len(rows) - 1):
        for k in range(len(cols) - 1):
            block = cost[rows[i] : rows[i + 1], cols[k] : cols[k + 1]]
            m, s = block.shape
            if m <= s:
                r, c = linear_sum_assignment(block)
                out[i, k] = block[r, c].mean()
            else:
                import ot  # POT imports scikit-learn (~1 s): loaded where a claim outgrows its cloud

                out[i, k] = ot.emd2(np.full(m, 1.0 / m), np.full(s, 1.0 / s), np.ascontiguousarray(block))
    return out


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


def lexical_members(
    claims: Sequence[str], samples: Sequence[str], answer: str, prompt: str
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``lex_absent``, ``lex_rarest`` and ``lex_share`` of each claim, and each sample's lexical support of each.

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
    members : dict of str to ndarray of shape (n,)
        The three lexical members (module docstring); 0 for a claim with no key word.
    holds : ndarray of shape (n, K), bool
        Sample k holds every key word of claim i (False for a claim with no key word).

    Examples
    --------
    >>> m, holds = lexical_members(["Bob was born in Paris."], ["Bob, born in Paris.", "Bob: born in Lyon."], "", "")
    >>> {k: round(float(v[0]), 4) for k, v in m.items()}, holds.tolist()  # key words bob, born, paris
    ({'lex_absent': 0.1667, 'lex_rarest': 0.5, 'lex_share': 0.5}, [[True, False]])
    """
    sets = [set(words(s)) for s in samples]
    n, k = len(claims), len(samples)
    out = {name: np.zeros(n) for name in ("lex_absent", "lex_rarest", "lex_share")}
    holds = np.zeros((n, k), dtype=bool)
    for i, claim in enumerate(claims):
        keys = key_words(claim, answer, prompt)
        if not keys or not k:
            continue
        p = presence(keys, sets)
        holds[i] = p.all(axis=0)
        out["lex_absent"][i] = 1.0 - p.mean()
        out["lex_rarest"][i] = 1.0 - p.mean(axis=1).min()
        out["lex_share"][i] = 1.0 - holds[i].mean()
    return out, holds


def claim_members(
    claim_states: Sequence[np.ndarray],
    sample_states: Sequence[np.ndarray],
    answer_states: np.ndarray,
    claims: Sequence[str],
    samples: Sequence[str],
    answer: str,
    prompt: str,
    partial: bool = True,
) -> dict[str, np.ndarray]:
    """Every member of ``MEMBERS`` for each claim of one judged answer (module docstring).

    Parameters
    ----------
    claim_states : sequence of n array-like of shape (m_i, dim)
        Each claim's token states, forced as a response to the prompt (as transported: the run's norm applied).
    sample_states : sequence of K array-like of shape (s_k, dim)
        Each sample's token states.
    answer_states : array-like of shape (a, dim)
        The judged answer's token states.
    claims, samples : sequence of str
        The claims' and samples' texts, in the order of their states.
    answer, prompt : str
        The judged answer's and the prompt's texts.
    partial : bool, default=True
        Compute ``ot_partial`` (one exact assignment per claim and sample); False: NaN, the others unchanged.

    Returns
    -------
    dict of str to ndarray of shape (n,)
        ``{member: values}`` in the order of ``MEMBERS``; higher = more likely unsupported.

    Raises
    ------
    BBWDError
        The states and texts disagree in number, or a cloud is empty or of another dimension.
    """
    if len(claim_states) != len(claims) or len(sample_states) != len(samples):
        raise BBWDError(
            f"{len(claim_states)} claim states for {len(claims)} claims, "
            f"{len(sample_states)} sample states for {len(samples)} samples"
        )
    n = len(claims)
    if n == 0:
        return {name: np.zeros(0) for name in MEMBERS}
    near = nearest_costs(claim_states, [*sample_states, answer_states])
    to_samples, to_answer = near[:, :-1], near[:, -1]
    root = np.sqrt(to_samples)
    lexical, holds = lexical_members(claims, samples, answer, prompt)
    supports = holds | (to_samples <= to_answer[:, None])
    surprise = unigram_surprise(claims, samples, answer)
    out = {
        "ot_nearest": root.mean(axis=1),
        "ot_partial": (
            np.sqrt(partial_costs(claim_states, sample_states)).mean(axis=1) if partial else np.full(n, np.nan)
        ),
        "ot_gap": root.mean(axis=1) - np.sqrt(to_answer),
        **lexical,
        "support_share": 1.0 - supports.mean(axis=1),
        "unigram": np.array([np.nan if u is None else u for u in surprise], dtype=float),
    }
    return {name: out[name] for name in MEMBERS}


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
    members, _ = lexical_members([texts[i] for i in kept], samples, answer, prompt)
    share = dict(zip(kept, members["lex_share"].tolist(), strict=True))
    return [
        ClaimScore(claims[i], share[i]) if i in share else ClaimScore(claims[i], None, error=f"claim {i} is empty")
        for i in range(len(claims))
    ]
