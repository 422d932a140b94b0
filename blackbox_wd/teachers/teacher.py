"""What a run asks of a teacher with its weights (:class:`Teacher`): transformers' (``forcing.HFTeacher``) or, for a
bundled Llama teacher scoring one prompt on CPU, numpy's (``array_forcing.ArrayTeacher``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from blackbox_wd.records import Messages, TokenStates
    from blackbox_wd.teachers.card import TextReader


class Teacher(Protocol):
    """A teacher that forces responses: its text reader, layer and projection, and its pass."""

    name: str
    n_layers: int
    layer: int
    max_length: int | None
    proj_dim: int
    proj_seed: int
    reader: TextReader
    tokenizer: PreTrainedTokenizerBase

    @property
    def device(self) -> object:
        """Where its weights run (``str`` of it: "cpu", "cuda:0")."""

    def prompt_ids(self, messages: Messages) -> list[int]:
        """Token ids of the prompt up to where the assistant's answer starts."""

    def response_ids(self, response: str | Sequence[int]) -> list[int]:
        """Token ids of a response, as the teacher forces it."""

    def check(self, index: int, prompt: list[int], response: list[int], name: str | None = None) -> None:
        """Raise BBWDError when a pair is empty or over the teacher's context."""

    def encode(
        self, messages: Messages, responses: Sequence[str | Sequence[int]], logprobs: bool = False
    ) -> list[TokenStates]:
        """Teacher-force every response after the same prompt."""

    def encode_ids(self, pairs: Sequence[tuple[list[int], list[int]]], logprobs: bool = False) -> list[TokenStates]:
        """Teacher-force (prompt ids, response ids) pairs."""


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
