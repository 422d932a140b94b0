"""The OpenAI wire format as the server reads and writes it: the request fields it checks, error bodies, SSE.

Only the fields bbwd uses are checked (strictly: ``"stream": "yes"`` is refused, not coerced); every
other field is allowed and reaches the target unchanged, since the raw body is what is forwarded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from blackbox_wd.records import JSONObject, Messages
from blackbox_wd.run.inputs import strict_loads
from blackbox_wd.run.result import Result, RowFields, result_row


class ServeError(Exception):
    """A request that fails with an HTTP status and an OpenAI-style error object; ``kind`` labels it in /metrics."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.error = {"message": message, "type": type, "param": param, "code": code, **extra}

    def body(self) -> dict[str, Any]:
        """``{"error": {message, type, param, code, ...}}``."""
        return {"error": self.error}


def context_exceeded(message: str, param: str = "messages") -> ServeError:
    """The 400 for a request over the teacher's context, refused before any sampling."""
    return ServeError(400, f"{param}: {message}", kind="context_length", param=param, code="context_length_exceeded")


class ContentPart(BaseModel):
    """One part of a message's content list; only text parts are read."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: StrictStr
    text: StrictStr | None = None


class Message(BaseModel):
    """One chat message: a role and content (a string, a list of parts, or null beside tool calls)."""

    model_config = ConfigDict(extra="allow", strict=True)
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: StrictStr | list[ContentPart] | None = None


class ScoringOptions(BaseModel):
    """The request's ``bbwd`` object: what bbwd scores beside the answer (it is not forwarded to the target)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    claims: list[StrictStr] | None = None  # statements about the answer, each given its score, p and flag


class ChatRequest(BaseModel):
    """The fields of a chat completion request that bbwd reads."""

    model_config = ConfigDict(extra="allow", strict=True)
    model: StrictStr
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    n: int = Field(1, ge=1, le=128)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    seed: int | None = None
    bbwd: ScoringOptions | None = None


def forwarded(raw: bytes, request: ChatRequest) -> bytes:
    """The body the target gets: the raw one, less the ``bbwd`` object when the request has one."""
    if request.bbwd is None:
        return raw
    return json.dumps({k: v for k, v in strict_loads(raw).items() if k != "bbwd"}).encode()


# Field names of the checked models: a validation error's location less pydantic's union-member tags.
FIELDS = frozenset().union(*(model.model_fields for model in (ChatRequest, Message, ContentPart, ScoringOptions)))


def _texts(request: ChatRequest) -> Iterator[tuple[str, str]]:
    """(param, string) of every string of the request that bbwd reads: the model and the messages' text."""
    yield "model", request.model
    for i, message in enumerate(request.messages):
        if isinstance(message.content, str):
            yield f"messages.{i}.content", message.content
        for j, part in enumerate(message.content if isinstance(message.content, list) else []):
            if part.text is not None:
                yield f"messages.{i}.content.{j}.text", part.text


def check_unicode(request: ChatRequest) -> None:
    """ServeError 400 naming the first string bbwd reads that is not valid Unicode (a lone surrogate escape)."""
    for param, text in _texts(request):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ServeError(
                400,
                f"{param}: not valid Unicode (a lone surrogate escape at character {exc.start})",
                kind="invalid_request",
                param=param,
                code="invalid_value",
            ) from None


def parse_request(raw: bytes, model: str) -> ChatRequest:
    """The checked request in a raw body; ServeError 400 (bad JSON or field) or 404 (another model than ``model``)."""
    try:
        data = strict_loads(raw)
    except (ValueError, RecursionError) as exc:  # also: not UTF-8, nested too deep, NaN
        raise ServeError(400, f"the request body is not valid JSON: {exc}", kind="invalid_json") from None
    if not isinstance(data, dict):
        raise ServeError(400, "the request body must be a JSON object", kind="invalid_request")
    try:
        request = ChatRequest.model_validate(data)
    except ValidationError as exc:
        deepest = max(exc.errors(), key=lambda e: len(e["loc"]))  # the most specific of a union's errors
        param = ".".join(str(part) for part in deepest["loc"] if isinstance(part, int) or part in FIELDS) or None
        raise ServeError(
            400,
            f"{param}: {deepest['msg']}" if param else deepest["msg"],
            kind="invalid_request",
            param=param,
            code="invalid_value",
        ) from None
    check_unicode(request)
    if request.model != model:
        raise ServeError(
            404,
            f"The model '{request.model}' does not exist: this server serves '{model}'",
            kind="unknown_model",
            param="model",
            code="model_not_found",
        )
    return request


def text_of(content: str | list[ContentPart] | None) -> str:
    """The text of a message's content: the string, or its text parts joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content or [] if part.type == "text" and part.text)


def scoring_messages(request: ChatRequest) -> Messages:
    """The conversation the K scoring samples answer: the text of system, user and assistant messages.

    A developer message counts as a system message; tool and function results, and messages with
    no text (an assistant turn of tool calls only, an image alone), are left out. ServeError 400
    when no message has text.
    """
    out = []
    for message in request.messages:
        text = text_of(message.content)
        if message.role not in ("tool", "function") and text.strip():
            out.append({"role": "system" if message.role == "developer" else message.role, "content": text})
    if not out:
        raise ServeError(
            400,
            "messages: no message has text content to score",
            kind="invalid_request",
            param="messages",
            code="invalid_value",
        )
    return out


def data_line(data: JSONObject) -> str:
    """The ``data:`` line of a server-sent event carrying a JSON object."""
    return "data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def sse(data: JSONObject) -> bytes:
    """One server-sent event carrying a JSON object."""
    return f"{data_line(data)}\n\n".encode()


def answer_text(body: JSONObject) -> str | None:
    """The text of a chat completion's first choice (None without one: tool calls only, an empty answer)."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) and content.strip() else None


def delta_text(data: str) -> str:
    """The first choice's text in one streamed chunk's data ("" when it has none)."""
    try:
        content = json.loads(data)["choices"][0]["delta"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def verdict(result: Result) -> dict[str, Any]:
    """The ``bbwd`` object: avg_wd, eigen_wd, k, the settings fingerprint; answer_wd, sentences and sentence_wd of
    the forwarded answer (or answer_error) when it has text; p_hallucination and flag when calibrated
    (``result.result_row``; fields without a value, or with an empty one, are left out)."""
    return result_row(result, VERDICT)


VERDICT_FIELDS = (
    "avg_wd",
    "eigen_wd",
    "k",
    "target_tokens",
    "fingerprint",
    "answer_wd",
    "answer_error",
    "sentence_wd",
    "answer_unigram",
    "answer_disagreement",
    "answer_nll",
    "cocoa",
    "eigen_wd_fixed",
    "baselines",
    "p_hallucination",
    "flag",
    "members",
    "stages",
    "sentences",
    "claims",
)  # in the bbwd object's order
VERDICT = RowFields(VERDICT_FIELDS, optional=frozenset(VERDICT_FIELDS))
