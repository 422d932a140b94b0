"""What a run asks of a teacher with its weights (:class:`Teacher`, the base of both engines): transformers'
(``forcing.HFTeacher``) or, for a bundled Llama teacher scoring one prompt on CPU, numpy's
(``array_forcing.ArrayTeacher``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from blackbox_wd.teachers.card import ReadsText, Response

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from blackbox_wd.records import Messages, TokenStates


class Teacher(ReadsText):
    """A teacher that forces responses: its text reader (``card.ReadsText``), layer and projection, and its pass
    (``encode_ids``, each engine's own)."""

    name: str
    n_layers: int
    layer: int
    max_length: int | None
    proj_dim: int
    proj_seed: int
    tokenizer: PreTrainedTokenizerBase

    @property
    def device(self) -> object:
        """Where its weights run (``str`` of it: "cpu", "cuda:0")."""
        raise NotImplementedError

    def encode(self, messages: Messages, responses: Sequence[Response], logprobs: bool = False) -> list[TokenStates]:
        """Teacher-force every response after the same prompt; one TokenStates per response."""
        prompt = self.prompt_ids(messages)
        return self.encode_ids([(prompt, self.response_ids(r)) for r in responses], logprobs)

    def encode_ids(self, pairs: Sequence[tuple[list[int], list[int]]], logprobs: bool = False) -> list[TokenStates]:
        """Teacher-force (prompt ids, response ids) pairs: the states of each pair's response."""
        raise NotImplementedError


def distinct_pairs(
    pairs: Sequence[tuple[list[int], list[int]]],
) -> dict[tuple[int, ...], dict[tuple[int, ...], list[int]]]:
    """Each distinct prompt of (prompt ids, response ids) pairs, each distinct response of it, and the indices of the
    pairs that are that prompt and response: what a teacher's pass forces once each, in first-seen order.

    >>> distinct_pairs([([1], [2]), ([1], [3]), ([1], [2])])
    {(1,): {(2,): [0, 2], (3,): [1]}}
    """
    where: dict[tuple[int, ...], dict[tuple[int, ...], list[int]]] = {}
    for i, (prompt, response) in enumerate(pairs):
        where.setdefault(tuple(prompt), {}).setdefault(tuple(response), []).append(i)
    return where
