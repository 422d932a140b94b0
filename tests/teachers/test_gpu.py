"""The GPU paths on a CUDA device: the levels attention and Gemma-3's sliding window in float32 and bf16, the
white-box sampler's draws, `bbwd serve` with a GPU teacher, and the Ray engine with a GPU teacher.

Marked ``gpu``: on a machine without CUDA each is reported as skipped with the reason (conftest), never run
silently as a pass. bench/RESULTS.md ("The teacher on a GPU") records where and when they last ran.
"""

from __future__ import annotations

import copy

import httpx
import numpy as np
import pytest
import torch
from serve_support import BbwdServe, bbwd_score

from blackbox_wd.clients.local import InverseCDFDraw, LocalSampler
from blackbox_wd.records import SamplingParams
from blackbox_wd.teachers.forcing import HFTeacher
from tests.run.test_prefix import FEW_SHOT, PROMPTS, RESPONSES, full_generate, plain, tiny_gemma

pytestmark = pytest.mark.gpu
DEVICE = "cuda"
# Largest |bbwd - plain forward| allowed, as a share of the largest |state| (logprobs: in nats). float32: the two
# paths' kernels differ in summation order only. bf16: a few units of its 2^-8 rounding, through two blocks.
TOLERANCE = {torch.float32: (1e-5, 1e-4), torch.bfloat16: (3e-2, 0.1)}


def gpu_teacher(tiny_llama, model: str, dtype: torch.dtype = torch.float32) -> HFTeacher:
    """The tiny Llama or Gemma-3 (sliding window of 4) of the CPU tests, copied to the GPU in ``dtype``."""
    base = tiny_llama[0] if model == "llama" else tiny_gemma(tiny_llama[1])
    return HFTeacher(copy.deepcopy(base).to(DEVICE, dtype), tiny_llama[1], name=model)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bf16"])
@pytest.mark.parametrize("model", ["llama", "gemma"])
def test_levels_states_equal_a_plain_forward(tiny_llama, model, dtype):
    """Prompts of mixed lengths and few-shot prompts sharing their exemplars: the states and log-probs of the
    shared-prefix pass equal one unpadded forward per response within the dtype's rounding."""
    teacher = gpu_teacher(tiny_llama, model, dtype)
    pairs = [(teacher.prompt_ids(m), teacher.response_ids(r)) for m in PROMPTS + FEW_SHOT for r in RESPONSES]
    assert max(len(p) for p, _ in pairs) > 8  # longer than two of Gemma's windows of 4
    states, logprobs = TOLERANCE[dtype]
    for (prompt, response), ts in zip(pairs, teacher.encode_ids(pairs, logprobs=True), strict=True):
        want, lp = plain(teacher, prompt, response)
        assert np.abs(ts.states - want).max() <= states * np.abs(want).max()
        assert np.abs(ts.logprobs - lp).max() <= logprobs


@pytest.mark.parametrize("model", ["llama", "gemma"])
def test_sampler_draws_what_a_full_generate_draws(tiny_llama, model):
    """Shared exemplars read once on the GPU, rows dropped as they stop: the tokens of stock ``generate``."""
    teacher = gpu_teacher(tiny_llama, model)
    params = SamplingParams(k=4, temperature=0.7, max_tokens=8, seed=9)
    requests = [(m, 4) for m in FEW_SHOT[:3]]
    got = LocalSampler(teacher).sample_many(requests, params, answers=True)
    flat = [t for ss in got for t in [*(s.token_ids for s in ss.samples), ss.answer.token_ids]]
    assert flat == full_generate(teacher, requests, params, answers=True)
    assert len(set(flat)) > 3


def test_the_draw_follows_the_softmax_on_the_gpu():
    """Scores on the GPU, one CPU generator per row: the tokens the CPU draws, at the softmax's frequencies."""
    n = 40_000
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0])
    gens = lambda: [torch.Generator().manual_seed(i) for i in range(n)]  # noqa: E731
    scores = torch.log(probs).repeat(n, 1)
    on_gpu = InverseCDFDraw(gens())(None, scores.to(DEVICE)).argmax(dim=-1).cpu()
    on_cpu = InverseCDFDraw(gens())(None, scores.clone()).argmax(dim=-1)
    assert torch.equal(on_gpu, on_cpu)
    freq = torch.bincount(on_gpu, minlength=4).double() / n
    assert torch.allclose(freq, probs.double(), atol=0.01)  # 4 standard errors at n = 40,000


def test_serve_with_a_gpu_teacher_scores_as_bbwd_score(tiny_folder, tmp_path):
    """`bbwd serve --device cuda` white-box on a saved model folder: the served answer is sample 0 and its scores
    are those of `bbwd score --device cuda` with the same settings."""
    args = ["--teacher", tiny_folder, "--device", DEVICE, "-k", "3", "--max-tokens", "8", "--seed", "5"]
    prompt = "what is the capital of france"
    with BbwdServe(args, tmp_path / "serve.log", token=None) as server:
        model = httpx.get(server.url + "/healthz").json()["model"]
        got = server.client().chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}])
    result = bbwd_score(*args, prompt, env={"BBWD_CACHE_DIR": str(tmp_path / "cache")})
    bbwd = got.model_extra["bbwd"]
    assert bbwd["fingerprint"] == result["settings"]["fingerprint"] and bbwd["k"] == 3
    assert result["settings"]["device"].startswith(DEVICE)  # "cuda:0": the device the teacher's weights are on
    assert bbwd["avg_wd"] == pytest.approx(result["avg_wd"], rel=1e-5) and bbwd["avg_wd"] > 0
    assert got.choices[0].message.content == result["responses"][0]


def close(a, b, rel: float) -> bool:
    """``a`` equals ``b`` but for floats, which agree to ``rel``, at any depth of dicts and lists."""
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=rel, abs=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b, strict=True))
    return a == b


def test_ray_engine_with_a_gpu_teacher_writes_the_rows_of_the_local_engine(tiny_folder, tmp_path):
    """`bbwd batch --engine ray` on a cluster with a GPU: ``device="auto"`` resolves to the GPU on the driver, the
    teacher actor holds the GPU, and the 30-line log (sampled, pre-sampled and bad lines) gives the local engine's
    rows on the same GPU, scores to 1e-5."""
    import asyncio

    import ray

    from blackbox_wd.settings import Settings
    from tests.doors.test_ray_engine import LOOPBACK, ray_runner, rows, run_local, tiny_log

    src = tmp_path / "in.jsonl"
    expected = tiny_log(src)
    settings = Settings(teacher=tiny_folder, target=tiny_folder, k=3, max_tokens=6, device="auto")
    mine = run_local(settings, src, tmp_path / "local.jsonl", True, 4)
    ray.init(num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False, _node_ip_address=LOOPBACK)
    try:
        runner = ray_runner(settings, True, 4)
        assert runner.teacher_gpus == 1 and runner.detector.reported.as_dict()["device"].startswith(DEVICE)
        summary = asyncio.run(runner.run(src, tmp_path / "ray.jsonl"))
    finally:
        ray.shutdown()
    out, local = rows(tmp_path / "ray.jsonl"), rows(tmp_path / "local.jsonl")
    assert (summary.records, summary.errors) == (30, 15)
    assert [r["error"] is None for r in out] == [e is None for e in expected]
    assert mine.settings["device"].startswith(DEVICE) and summary.settings == mine.settings
    drop = ("timings", "usage")
    for a, b in zip(out, local, strict=True):
        assert close({k: v for k, v in a.items() if k not in drop}, {k: v for k, v in b.items() if k not in drop}, 1e-5)
