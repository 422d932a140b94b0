"""Live: `bbwd serve` in front of a real llama.cpp server (the embedded SmolLM2) on 127.0.0.1, reached through
a small pass-through proxy, driven by the official openai client, sync and async: the answer is the target's
own, every call is scored by the same pipeline as `bbwd score`, concurrent calls share teacher passes, streams
end with the verdict, and a stream the target drops midway ends with an error event, not a hang."""

from __future__ import annotations

import asyncio
import math
import time

import openai
import pytest
import torch
from conftest import direct_sentences
from serve_support import BbwdServe, CuttingProxy, metric, passes_with_company

from bench.common import LlamaCppServer

pytestmark = pytest.mark.slow

K = 2
SCORE_ARGS = ["-k", str(K), "--max-tokens", "12", "--temperature", "0.8", "--seed", "3"]


@pytest.fixture(scope="module")
def llama():
    """llama.cpp serving the embedded GGUF with 4 slots (n honoured up to 4, logprobs returned), on one thread:
    on a shared 2-core machine two spinning threads made a token take seconds."""
    import xllamacpp  # noqa: F401  (in the test extra: a missing install fails here, loudly)

    from blackbox_wd.teachers.embedded import ensure_gguf

    with LlamaCppServer(ensure_gguf(), n_parallel=4, n_threads=1) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(llama):
    """llama.cpp behind a pass-through proxy that can cut a stream ([cut] in the last message)."""
    with CuttingProxy(llama.base_url) as server:
        yield server


@pytest.fixture(scope="module")
def served(proxy, llama, tmp_path_factory):
    """`bbwd serve --target smollm2-135m --base-url <proxy to llama.cpp>` with a token and its own cache."""
    tmp = tmp_path_factory.mktemp("serve_api")
    args = [
        "--target",
        llama.model,
        "--base-url",
        proxy.base_url,
        "--teacher",
        "smollm2-135m",
        "--cache-dir",
        str(tmp / "cache"),
        "--all-scores",  # every score in the bbwd object, short answers too (#71)
        *SCORE_ARGS,
    ]
    with BbwdServe(args, tmp / "serve.log", env={"BBWD_API_TIMEOUT": "120"}) as server:
        server.cache_dir = tmp / "cache"
        yield server


def check_verdict(bbwd: dict, fingerprint: str, answer: str | None = None) -> None:
    """A complete verdict: finite scores, K, the server's fingerprint, AnswerWD and the sentences of the answer
    (spans of its text when given), no calibration fields."""
    assert set(bbwd) == {
        *(
            "avg_wd",
            "eigen_wd",
            "eigen_wd_fixed",
            "answer_wd",
            "sentences",
            "sentence_wd",
            "answer_unigram",
            "answer_disagreement",
        ),
        *("baselines", "k", "target_tokens", "fingerprint"),
    }
    assert bbwd["target_tokens"] > 0  # the target's tokens for the K samples
    assert math.isfinite(bbwd["answer_wd"]) and bbwd["answer_wd"] >= 0
    assert {"ls", "es", "er", "dse"} <= set(bbwd["baselines"]) and bbwd["eigen_wd_fixed"] >= 1
    sentence_keys = {"text", "start", "end", "score", "unigram", "p_hallucination", "flag"}
    assert bbwd["sentences"] and all(set(s) == sentence_keys for s in bbwd["sentences"])
    known = [s["score"] for s in bbwd["sentences"] if s["score"] is not None]
    assert bbwd["sentence_wd"] == pytest.approx(sum(known) / len(known), rel=1e-12)
    if answer is not None:
        assert all(answer[s["start"] : s["end"]] == s["text"] for s in bbwd["sentences"])
    assert bbwd["k"] == K and bbwd["fingerprint"] == fingerprint
    assert math.isfinite(bbwd["avg_wd"]) and bbwd["avg_wd"] >= 0
    assert math.isfinite(bbwd["eigen_wd"]) and bbwd["eigen_wd"] >= 1


def healthz_fingerprint(server: BbwdServe) -> str:
    import httpx

    return httpx.get(server.url + "/healthz", timeout=30).json()["fingerprint"]


def test_answer_is_the_targets_and_scored_as_bbwd_score(served, llama, proxy):
    from openai import OpenAI

    from blackbox_wd import Detector, Settings

    request = dict(
        model=llama.model,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        temperature=0,
        max_tokens=8,
        seed=1,
    )
    got = served.client().chat.completions.create(**request).to_dict()
    direct = OpenAI(base_url=llama.base_url, api_key="x", max_retries=0).chat.completions.create(**request).to_dict()
    bbwd = got.pop("bbwd")
    assert set(got) == set(direct)  # the target's own body: its fields, no others but bbwd
    assert got["choices"] == direct["choices"] and got["model"] == direct["model"]
    assert got["choices"][0]["message"]["content"].strip()
    fingerprint = healthz_fingerprint(served)
    check_verdict(bbwd, fingerprint, got["choices"][0]["message"]["content"])

    # one pipeline, one fingerprint: `bbwd score` with the same settings and cache scores the same samples
    settings = Settings(
        target=llama.model,
        base_url=proxy.base_url,
        k=K,
        max_tokens=12,
        temperature=0.8,
        seed=3,
        device="cpu",
        cache_dir=str(served.cache_dir),
    )
    detector = Detector.from_settings(settings, all_scores=True)  # as `bbwd score`: every score, the teacher loaded
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a shared 2-core machine: OpenMP's spinning threads slow a forward many times
    try:
        result = detector.score("What is the capital of France?")
    finally:
        torch.set_num_threads(threads)
    assert result.usage.cache_hits == K and result.usage.requests == 0  # the server's samples, from the cache
    assert detector.fingerprint == fingerprint == result.settings["fingerprint"]
    assert bbwd["avg_wd"] == pytest.approx(result.avg_wd, rel=1e-5)
    assert bbwd["eigen_wd"] == pytest.approx(result.eigen_wd, rel=1e-5)
    # AnswerWD: the forwarded answer's cloud against the same K samples' clouds
    from blackbox_wd.measure.transport import w2_to_each
    from blackbox_wd.measure.wd import answer_wd

    answer = got["choices"][0]["message"]["content"]
    states = detector.teacher.encode(result.prompt, [answer, *result.responses])
    assert bbwd["answer_wd"] == pytest.approx(
        answer_wd(w2_to_each(states[0].states, [s.states for s in states[1:]])), rel=1e-5
    )
    # its sentences: the answer's tokens' costs in the same plans, per sentence
    texts, scores = direct_sentences(detector.teacher, result.prompt, answer, result.responses)
    assert [s["text"] for s in bbwd["sentences"]] == texts
    assert [s["score"] for s in bbwd["sentences"]] == pytest.approx(scores, rel=1e-5)
    detector.sampler.close()


def test_32_concurrent_requests_all_scored_sharing_teacher_passes(served, llama):
    """32 requests at once, twice. The first time their scoring samples come from llama.cpp, a few at a time
    (its 4 slots), and a 135M teacher on one thread keeps up with them; the second time they come from the
    cache at once, so requests pile up at the teacher, as they do when a teacher is slower than its target."""
    route = "/v1/chat/completions"
    fingerprint = healthz_fingerprint(served)

    async def ask_all():
        async with served.async_client() as client:
            return await asyncio.gather(
                *(
                    client.chat.completions.create(
                        model=llama.model,
                        max_tokens=6,
                        messages=[{"role": "user", "content": f"Name one animal that starts with the letter {c}."}],
                    )
                    for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + "abcdef"
                )
            )

    for _ in range(2):
        before = served.metrics()
        answers = asyncio.run(ask_all())
        after = served.metrics()
        assert len(answers) == 32
        for answer in answers:
            assert answer.choices[0].message.content is not None
            check_verdict(answer.model_extra["bbwd"], fingerprint)
        assert (
            metric(after, "bbwd_requests_total", route=route, status="200")
            - metric(before, "bbwd_requests_total", route=route, status="200")
            == 32
        )
        scored = metric(after, "bbwd_teacher_batch_requests_sum") - metric(before, "bbwd_teacher_batch_requests_sum")
        assert scored == 32  # every request went through a teacher pass once
        assert metric(after, "bbwd_queue_depth") == 0
    assert passes_with_company(after) - passes_with_company(before) >= 1  # a pass held more than one request


def test_stream_passes_chunks_through_then_the_verdict(served, llama):
    stream = served.client().chat.completions.create(
        model=llama.model,
        stream=True,
        max_tokens=8,
        temperature=0,
        messages=[{"role": "user", "content": "What is the capital of Italy?"}],
    )
    chunks = list(stream)
    *answer, last = chunks
    assert len(answer) >= 2 and all(c.choices for c in answer)
    text = "".join(c.choices[0].delta.content or "" for c in answer)
    assert text.strip()
    assert answer[-1].choices[0].finish_reason in ("stop", "length")
    assert last.choices == [] and last.id == answer[0].id and last.model == answer[0].model
    check_verdict(last.model_extra["bbwd"], healthz_fingerprint(served), text)  # the gathered deltas' sentences
    direct = served.client().chat.completions.create(  # the same request, not streamed: the same answer
        model=llama.model,
        max_tokens=8,
        temperature=0,
        messages=[{"role": "user", "content": "What is the capital of Italy?"}],
    )
    assert direct.choices[0].message.content == text


def test_n_choices_pass_through_with_one_verdict(served, llama):
    got = served.client().chat.completions.create(
        model=llama.model,
        n=3,
        max_tokens=6,
        temperature=1.0,
        messages=[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Name a colour."}],
    )
    assert [c.index for c in got.choices] == [0, 1, 2]
    check_verdict(got.model_extra["bbwd"], healthz_fingerprint(served))


def test_a_stream_cut_midway_ends_with_an_error_event(served, llama):
    t0 = time.monotonic()
    stream = served.client().chat.completions.create(
        model=llama.model,
        stream=True,
        max_tokens=12,
        temperature=0,
        messages=[{"role": "user", "content": "Tell me about the sea. [cut]"}],
    )
    received = []
    with pytest.raises(openai.APIError) as err:
        for chunk in stream:
            received.append(chunk)
    assert received and all(c.choices for c in received)  # the target's first events came through
    assert err.value.body["type"] == "upstream_error" and "stream broken" in err.value.body["message"]
    assert time.monotonic() - t0 < 120
    answer = served.client().chat.completions.create(  # the server goes on
        model=llama.model, max_tokens=4, messages=[{"role": "user", "content": "Name a fish."}]
    )
    assert answer.model_extra["bbwd"]["k"] == K
