"""The exception types the pipeline raises and the CLI turns into a one-line error."""

from __future__ import annotations

from typing import Any


class BBWDError(Exception):
    """A user-facing error: its message is one line that names the problem.

    ``transient`` is True for failures that may not recur (network, timeouts, HTTP 5xx/408/409/429
    after the retry budget, empty content): a resumed batch or eval computes such records again.
    """

    transient: bool = False


class SamplingError(BBWDError):
    """Drawing a prompt's samples failed; ``usage`` is what the samples that did succeed cost.

    ``status`` is the HTTP status of the last failed request when the server answered one (None for
    timeouts and dropped connections).
    """

    def __init__(self, message: str, usage: Any = None, transient: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.usage = usage
        self.transient = transient
        self.status = status


class PromptTooLong(BBWDError):
    """A prompt that does not fit the teacher's context (found before any sampling)."""


def one_line(exc: BaseException | str, limit: int = 300) -> str:
    """An exception's message (or a text) on one line (whitespace collapsed), cut to ``limit`` characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
