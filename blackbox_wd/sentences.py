"""Which sentence is wrong: the judged answer's sentences with their scores (issue #23's contract)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SentenceScore:
    """A sentence of the judged answer (character offsets into it) and its score (None: it holds no token)."""

    text: str
    start: int
    end: int
    score: float | None
