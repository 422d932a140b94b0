"""The server's wire format without a server: request checks, the scored conversation, the bbwd object."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from blackbox_wd.doors.serve.protocol import ServeError, parse_request, scoring_messages, verdict
from blackbox_wd.records import Usage
from blackbox_wd.run.result import Result

MODEL = "served"


def body(**fields) -> bytes:
    return json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **fields}).encode()


def refused(raw: bytes) -> ServeError:
    with pytest.raises(ServeError) as err:
        parse_request(raw, MODEL)
    return err.value


@pytest.mark.parametrize(
    "raw,status,param",
    [
        (b"{not json", 400, None),
        (b"\xff\xfe", 400, None),
        (b"[" * 100_000, 400, None),
        (b'"a string"', 400, None),
        (body(messages="hi"), 400, "messages"),
        (body(messages=[{"role": "user", "content": 3}]), 400, "messages.0.content"),
        (body(messages=[{"role": "user", "content": [{"type": 3}]}]), 400, "messages.0.content.0.type"),
        (body(n=0), 400, "n"),
        (body(temperature=True), 400, "temperature"),
        (body(max_tokens=1.5), 400, "max_tokens"),
        (body(model="other"), 404, "model"),
    ],
)
def test_bad_requests_are_refused_with_their_status_and_param(raw, status, param):
    err = refused(raw)
    assert (err.status, err.error["param"]) == (status, param)
    assert set(err.body()["error"]) >= {"message", "type", "param", "code"}


def test_other_fields_are_allowed_and_read_fields_checked():
    request = parse_request(
        body(tools=[{"type": "function"}], response_format={"type": "text"}, n=2, seed=-1, temperature=0, stream=True),
        MODEL,
    )
    assert (request.n, request.seed, request.temperature, request.stream) == (2, -1, 0.0, True)
    assert request.model_extra["tools"] == [{"type": "function"}]


def test_scored_conversation_is_the_text_of_system_user_and_assistant_turns():
    request = parse_request(
        body(
            messages=[
                {"role": "developer", "content": "Be brief."},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Look:"},
                        {"type": "image_url", "image_url": {}},
                        {"type": "text", "text": "what is it?"},
                    ],
                },
                {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
                {"role": "tool", "content": "a cat", "tool_call_id": "1"},
                {"role": "assistant", "content": "A cat."},
                {"role": "user", "content": "Sure?"},
            ]
        ),
        MODEL,
    )
    assert scoring_messages(request) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Look:\nwhat is it?"},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "Sure?"},
    ]
    image_only = parse_request(body(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), MODEL)
    with pytest.raises(ServeError) as err:
        scoring_messages(image_only)
    assert err.value.status == 400 and err.value.error["param"] == "messages"


def result(**extra) -> Result:
    return Result(
        prompt=[],
        responses=["a", "b", "c"],
        token_counts=[1, 1, 1],
        D=np.zeros((3, 3)),
        avg_wd=np.float64(1.5),
        eigen_wd=2.0,
        settings={"fingerprint": "0123456789abcdef"},
        **extra,
    )


def test_verdict_has_the_scores_k_and_fingerprint():
    out = verdict(result())
    assert out == {"avg_wd": 1.5, "eigen_wd": 2.0, "k": 3, "target_tokens": 3, "fingerprint": "0123456789abcdef"}
    assert type(out["avg_wd"]) is float
    # an API target's tokens are its usage's, fresh and cached, not the teacher's count
    api = result(usage=Usage(completion_tokens=7, cached_completion_tokens=5, requests=1, cache_hits=2))
    assert verdict(api)["target_tokens"] == 12


def test_verdict_carries_calibration_fields_when_the_result_has_them():
    @dataclass
    class Calibrated(Result):
        p_hallucination: float | None = None
        flag: bool | None = None

    out = verdict(
        Calibrated(
            prompt=[],
            responses=["a", "b"],
            token_counts=[1, 1],
            D=np.zeros((2, 2)),
            avg_wd=1.0,
            eigen_wd=1.0,
            settings={"fingerprint": "f" * 16},
            p_hallucination=0.8,
            flag=True,
        )
    )
    assert (out["p_hallucination"], out["flag"]) == (0.8, True)
    assert "flag" not in verdict(
        Calibrated(
            prompt=[],
            responses=["a", "b"],
            token_counts=[1, 1],
            D=np.zeros((2, 2)),
            avg_wd=1.0,
            eigen_wd=1.0,
            settings={"fingerprint": "f" * 16},
        )
    )
