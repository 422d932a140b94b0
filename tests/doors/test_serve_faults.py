"""Live: `bbwd serve` in front of the loopback fault server (real recorded bodies, scripted faults), driven by
the official openai client: bad input gets an OpenAI-style 4xx and the server goes on, the token guards every
route but /healthz, upstream 429/500/disconnects end as the answer or a clean 502 (never a hang), a request
the teacher cannot take fails alone, the upstream key is never echoed, logged or cached, and SIGTERM lets
a request in flight finish."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections import Counter

import httpx
import openai
import pytest
from api_support import FaultServer, recorded_bodies
from serve_support import BbwdServe, metric

pytestmark = pytest.mark.slow

MODEL = "served-model"
UPSTREAM_KEY = "sk-upstream-secret-key-5f4e3d2c1b0a"
MAX_BODY = 200_000
BUDGET = 2.0  # seconds each upstream request may spend retrying


def action_for(seen: Counter):
    """The fault server's action from a marker in the last message: [500], [429], [drop], [400], [401],
    [stall], or [flaky] (the first two requests of the prompt fail with 500, then ok)."""

    def pick(body: dict) -> str | None:
        text = str((body.get("messages") or [{}])[-1].get("content"))
        for marker, action in (
            ("[500]", "500"),
            ("[429]", "429"),
            ("[drop]", "drop"),
            ("[400]", "400"),
            ("[401]", "401"),
            ("[stall]", "stall:3"),
        ):
            if marker in text:
                return action
        if "[flaky]" in text:
            seen[text] += 1
            return "500" if seen[text] <= 2 else "ok"
        return None

    return pick


@pytest.fixture(scope="module")
def fault():
    leaky = {
        "error": {
            "message": f"Incorrect API key provided: {UPSTREAM_KEY}",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    with FaultServer(api_key=UPSTREAM_KEY, override=action_for(Counter()), error_bodies={401: leaky}) as server:
        yield server


@pytest.fixture(scope="module")
def served(fault, tmp_path_factory):
    """`bbwd serve --target served-model --base-url <fault server> --api-key-env ...`, K=2, a 2 s retry budget."""
    tmp = tmp_path_factory.mktemp("serve_faults")
    args = [
        "--target",
        MODEL,
        "--base-url",
        fault.base_url,
        "--api-key-env",
        "UPSTREAM_KEY_FOR_TEST",
        "-k",
        "2",
        "--max-tokens",
        "24",
        "--cache-dir",
        str(tmp / "cache"),
        "--retry-budget",
        str(BUDGET),
        "--max-body-bytes",
        str(MAX_BODY),
    ]
    env = {"UPSTREAM_KEY_FOR_TEST": UPSTREAM_KEY, "BBWD_API_BACKOFF_CAP": "0.1", "BBWD_API_TIMEOUT": "10"}
    with BbwdServe(args, tmp / "serve.log", env=env) as server:
        server.tmp = tmp
        server.bodies = []  # every response body the tests saw, for the key check at the end
        yield server


def ask(server: BbwdServe, content: str, **kw) -> dict:
    """A chat completion through the official client; its body as a dict (kept for the key check)."""
    try:
        got = (
            server.client()
            .chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}], **kw)
            .to_dict()
        )
    except openai.APIStatusError as exc:
        server.bodies.append(exc.response.text)
        raise
    server.bodies.append(json.dumps(got))
    return got


def raw_post(server: BbwdServe, content: bytes, token: str | None = "server") -> httpx.Response:
    """A POST with a raw body (what the openai client cannot send)."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {server.token if token == 'server' else token}"
    response = httpx.post(server.base_url + "/chat/completions", content=content, headers=headers, timeout=60)
    server.bodies.append(response.text)
    return response


def good(server: BbwdServe) -> None:
    """A good request is answered and scored."""
    got = ask(server, "What is the capital of France?")
    assert got["choices"][0]["message"]["content"] and got["bbwd"]["k"] == 2


def test_bad_input_gets_openai_errors_and_the_server_goes_on(served, fault):
    sent = len(fault.received)
    cases = [
        (raw_post(served, b'{"model": "served-model", "messages": [}'), 400, None, "not valid JSON"),
        (raw_post(served, b'[1, 2]'), 400, None, "must be a JSON object"),
        (raw_post(served, json.dumps({"model": MODEL}).encode()), 400, "messages", "messages: Field required"),
        (raw_post(served, json.dumps({"model": MODEL, "messages": []}).encode()), 400, "messages", "at least 1"),
        (
            raw_post(served, json.dumps({"model": MODEL, "messages": [{"role": "robot", "content": "x"}]}).encode()),
            400,
            "messages.0.role",
            "messages.0.role",
        ),
        (
            raw_post(
                served,
                json.dumps({"model": MODEL, "stream": "yes", "messages": [{"role": "user", "content": "x"}]}).encode(),
            ),
            400,
            "stream",
            "valid boolean",
        ),
        (
            raw_post(
                served, json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x" * MAX_BODY}]}).encode()
            ),
            413,
            None,
            f"larger than {MAX_BODY} bytes",
        ),
        (
            raw_post(served, json.dumps({"model": "gpt-17", "messages": [{"role": "user", "content": "x"}]}).encode()),
            404,
            "model",
            "'gpt-17' does not exist",
        ),
    ]
    for response, status, param, text in cases:
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert set(error) >= {"message", "type", "param", "code"} and error["param"] == param
        assert text in error["message"]
    with pytest.raises(openai.BadRequestError) as bad:  # the official client sees them as OpenAI errors
        ask(served, "x", temperature=5)
    assert bad.value.body["param"] == "temperature"
    with pytest.raises(openai.NotFoundError) as missing:
        served.client().chat.completions.create(model="gpt-17", messages=[{"role": "user", "content": "x"}])
    assert missing.value.body["code"] == "model_not_found"
    assert len(fault.received) == sent  # nothing reached the target
    good(served)
    m = served.metrics()
    assert metric(m, "bbwd_errors_total", kind="invalid_json") == 1
    assert metric(m, "bbwd_errors_total", kind="invalid_request") == 6
    assert metric(m, "bbwd_errors_total", kind="body_too_large") == 1
    assert metric(m, "bbwd_errors_total", kind="unknown_model") == 2


def test_token_required_on_every_route_but_health(served):
    assert httpx.get(served.url + "/healthz", timeout=30).status_code == 200
    assert httpx.get(served.url + "/metrics", timeout=30).status_code == 401
    wrong = httpx.get(served.url + "/metrics", headers={"Authorization": "Bearer nope"}, timeout=30)
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    no_token = raw_post(served, b"{}", token=None)
    assert no_token.status_code == 401 and no_token.headers["www-authenticate"] == "Bearer"
    with pytest.raises(openai.AuthenticationError):
        served.client(api_key="not-the-token").chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "x"}]
        )
    good(served)


@pytest.mark.parametrize("marker,status", [("[500]", 500), ("[429]", 429), ("[drop]", None)])
def test_upstream_failure_after_retries_is_a_clean_502(served, marker, status):
    t0 = time.monotonic()
    with pytest.raises(openai.APIStatusError) as err:
        ask(served, f"What is the capital of Spain? {marker}")
    assert err.value.status_code == 502
    error = err.value.body
    assert error["type"] == "upstream_error" and error["upstream_status"] == status
    assert "\n" not in error["message"]
    assert time.monotonic() - t0 < BUDGET + 20  # the retry budget, then an answer: never a hang
    good(served)


def test_transient_upstream_failures_are_retried_to_the_answer(served, fault):
    got = ask(served, "What is the capital of Peru? [flaky]")
    assert got["choices"][0]["message"]["content"] and got["bbwd"]["k"] == 2


def test_a_client_error_of_the_target_comes_back_as_is(served):
    with pytest.raises(openai.BadRequestError) as err:
        ask(served, "What is the capital of Chile? [400]")
    assert err.value.status_code == 400 and err.value.body["message"]  # the target's own message


def test_body_forwarded_unchanged_tools_pass_through_and_text_is_scored(served, fault):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]
    messages = [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Capital of Ghana?"},
                {"type": "image_url", "image_url": {"url": "data:,"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Accra"},
        {"role": "user", "content": "So? [tools]"},
    ]
    request = {"model": MODEL, "messages": messages, "tools": tools, "tool_choice": "auto", "user": "u-1"}
    sent = len(fault.received)
    response = raw_post(served, json.dumps(request).encode())
    assert response.status_code == 200, response.text
    body = response.json()
    bbwd = body.pop("bbwd")
    assert bbwd["k"] == 2
    assert body in [dict(b, model=MODEL) for b in recorded_bodies()]  # exactly the target's body, plus bbwd
    new = fault.received[sent:]
    forwarded = [r for r in new if "tools" in r["body"]]
    assert [r["body"] for r in forwarded] == [request]  # the client's request, unchanged, sent once
    # an earlier test's sample request, sent before its forward failed, can reach the fault server late: ours
    # are those whose last message is this conversation's
    scoring = [r["body"] for r in new if "tools" not in r["body"] and "[tools]" in str(r["body"]["messages"][-1])]
    assert scoring and all(
        b["messages"]
        == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Capital of Ghana?"},
            {"role": "user", "content": "So? [tools]"},
        ]
        for b in scoring
    )
    assert all(r["authorization"] == f"Bearer {UPSTREAM_KEY}" for r in new)  # bbwd's key, never the client's token


def test_a_request_the_teacher_cannot_take_fails_alone(served, fault):
    long = "word " * 9000  # over SmolLM2's 8192-token context

    async def together():
        async with served.async_client() as client:
            return await asyncio.gather(
                *(
                    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}])
                    for text in ["Name a river.", long, "Name a mountain."]
                ),
                return_exceptions=True,
            )

    sent = len(fault.received)
    first, failed, third = asyncio.run(together())
    assert first.model_extra["bbwd"]["k"] == 2 and third.model_extra["bbwd"]["k"] == 2
    assert isinstance(failed, openai.BadRequestError) and failed.status_code == 400  # refused before any sampling
    assert (
        failed.body["code"] == "context_length_exceeded"
        and "over the teacher's context of 8192" in failed.body["message"]
    )
    assert not any("word word" in str(r["body"]) for r in fault.received[sent:])  # nothing of it reached the target
    good(served)


def test_upstream_key_never_echoed_logged_or_cached(served):
    with pytest.raises(openai.APIStatusError) as err:  # the target's 401 body quotes the key...
        ask(served, "What is the capital of Egypt? [401]")
    assert err.value.status_code == 502 and err.value.body["upstream_status"] == 401
    assert "<scrubbed>" in err.value.body["message"]  # ...which is scrubbed
    secret = UPSTREAM_KEY.encode()
    for body in served.bodies:  # every response of this module so far
        assert UPSTREAM_KEY not in body
    files = [p for p in served.tmp.rglob("*") if p.is_file()]
    assert any(p.name == "serve.log" for p in files) and any("cache" in p.parts for p in files)
    for path in files:  # the server's log and the sample cache
        assert secret not in path.read_bytes(), path


def test_sigterm_finishes_the_request_in_flight(served, fault):
    """Runs last: it stops the module's server."""
    outcome: dict = {}

    def slow() -> None:
        try:
            outcome["body"] = ask(served, "What is the capital of Kenya? [stall]")
        except Exception as exc:  # noqa: BLE001 - reported by the assertions below
            outcome["error"] = exc

    thread = threading.Thread(target=slow)
    thread.start()
    deadline = time.monotonic() + 60
    while not any("[stall]" in str(r["body"].get("messages")) for r in fault.received):
        assert time.monotonic() < deadline, "the slow request never reached the target"
        time.sleep(0.05)
    code = served.stop()  # SIGTERM while the target stalls for 3 s
    thread.join(60)
    assert code == -signal.SIGTERM  # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert "Application shutdown complete" in served.log_path.read_text()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["body"]["bbwd"]["k"] == 2 and outcome["body"]["choices"][0]["message"]["content"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(served.url + "/healthz", timeout=5)
