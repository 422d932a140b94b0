"""A local model answering chat requests itself (white-box serving, the offline demo).

The answer is drawn by the same local sampler (llama.cpp or transformers: ``clients.local_sampler_for``)
that draws the K scoring samples, on the model thread, from the text of the conversation
(:func:`~blackbox_wd.doors.serve.protocol.scoring_messages`): ``n`` choices with the request's
``temperature``, ``top_p``, ``max_completion_tokens``/``max_tokens`` and ``seed``, each defaulting
to the detector's settings (temperature 0 is greedy). Tools, response formats and other fields are
not read. A stream is the finished answer sent as chunks: one with the text, one with the finish reason.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator
from concurrent.futures import Executor
from typing import Any

from blackbox_wd.clients.sampling import BatchSampler
from blackbox_wd.doors.serve.protocol import ChatRequest, ServeError, context_exceeded, data_line
from blackbox_wd.records import Messages, SampleSet, SamplingParams


def _or(value: Any, default: Any) -> Any:
    """``value`` unless it is None."""
    return default if value is None else value


class LocalTarget:
    """Chat completions from a local sampler's model, drawn on ``model_pool``."""

    def __init__(self, sampler: BatchSampler, defaults: SamplingParams, model: str, model_pool: Executor) -> None:
        self.sampler = sampler
        self.defaults = defaults
        self.model = model
        self.model_pool = model_pool

    def params(self, request: ChatRequest) -> SamplingParams:
        """The request's sampling fields, each defaulting to the detector's."""
        d = self.defaults
        return SamplingParams(
            k=request.n,
            temperature=_or(request.temperature, d.temperature),
            top_p=_or(request.top_p, d.top_p),
            max_tokens=_or(request.max_completion_tokens, _or(request.max_tokens, d.max_tokens)),
            seed=_or(request.seed, d.seed),
        )

    def admit(self, request: ChatRequest, prompt_tokens: int) -> None:
        """ServeError 400 when the answer's work is over the bound: ``n`` x max tokens at most K x ``--max-tokens``
        (the scoring samples' own), and the prompt plus max tokens within the model's context."""
        params, d = self.params(request), self.defaults
        param = "max_completion_tokens" if request.max_completion_tokens is not None else "max_tokens"
        if params.k * params.max_tokens > d.k * d.max_tokens:
            raise ServeError(
                400,
                f"n x {param} = {params.k} x {params.max_tokens} tokens is over this server's "
                f"bound of K x --max-tokens = {d.k} x {d.max_tokens} tokens a request",
                kind="invalid_request",
                param=param,
                code="invalid_value",
            )
        context = self.sampler.teacher.max_length
        if context and prompt_tokens + params.max_tokens > context:
            raise context_exceeded(
                f"the prompt has {prompt_tokens} tokens: with {params.max_tokens} more it is over "
                f"the model's context of {context}",
                param,
            )

    def _draw(self, messages: Messages, params: SamplingParams) -> tuple[SampleSet, int]:
        """The choices and the prompt's token count (on the model thread)."""
        return self.sampler.sample(messages, params), len(self.sampler.teacher.prompt_ids(messages))

    async def complete(self, request: ChatRequest, raw: bytes, messages: Messages) -> dict[str, Any]:
        """A chat.completion body with ``n`` choices."""
        drawn, prompt_tokens = await asyncio.get_running_loop().run_in_executor(
            self.model_pool, self._draw, messages, self.params(request)
        )
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": s.text},
                "logprobs": None,
                "finish_reason": s.finish_reason,
            }
            for i, s in enumerate(drawn.samples)
        ]
        completion = sum(len(s.token_ids or ()) for s in drawn.samples)
        return {
            "id": f"chatcmpl-bbwd-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion,
            },
        }

    async def stream(self, request: ChatRequest, raw: bytes, messages: Messages) -> AsyncGenerator[str, None]:
        """The event-stream lines of the finished answer: per choice a text chunk, then a finish chunk."""
        body = await self.complete(request, raw, messages)
        head = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": self.model}
        for choice in body["choices"]:
            for delta, finish in ((choice["message"], None), ({}, choice["finish_reason"])):
                chunk = {
                    **head,
                    "choices": [{"index": choice["index"], "delta": delta, "logprobs": None, "finish_reason": finish}],
                }
                yield data_line(chunk)
                yield ""
