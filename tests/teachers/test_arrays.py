"""The numpy teacher (``teachers.arrays``, ``teachers.array_forcing``) against transformers' pass: the same states,
last states and log-probs to float32 rounding, on a tiny random Llama (untied head, grouped-query attention) and on
the bundled SmolLM2; and where the placement picks it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from blackbox_wd.teachers.array_forcing import ArrayTeacher, array_teacher
from blackbox_wd.teachers.card import read_card
from blackbox_wd.teachers.files import present
from blackbox_wd.teachers.forcing import HFTeacher
from blackbox_wd.teachers.hf import placement, ready_teacher
from blackbox_wd.teachers.registry import resolve

TINY_MESSAGES = [[{"role": "user", "content": w}] for w in ("the cat sat", "a dog ran far away")]
TINY_RESPONSES = ["the cat", "on the mat", "the cat", "a"]


def close(got, want, rel: float = 1e-5) -> None:
    """Equal to float32 rounding: within ``rel`` of the largest magnitude."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= rel * max(np.abs(want).max(), 1.0)


def pairs_of(teacher, messages, responses):
    return [(teacher.prompt_ids(m), teacher.response_ids(r)) for m in messages for r in responses]


@pytest.mark.parametrize("logprobs", [False, True])
def test_the_tiny_llamas_states_equal_transformers(tiny_llama, tiny_folder, logprobs: bool) -> None:
    model, tok = tiny_llama
    torch_teacher = HFTeacher(model, tok, layer=2)
    numpy_teacher = ArrayTeacher(read_card(present(resolve(tiny_folder)), layer=2), Path(tiny_folder))
    pairs = pairs_of(torch_teacher, TINY_MESSAGES, TINY_RESPONSES)
    assert pairs == pairs_of(numpy_teacher, TINY_MESSAGES, TINY_RESPONSES)
    got, want = numpy_teacher.encode_ids(pairs, logprobs), torch_teacher.encode_ids(pairs, logprobs)
    for g, w in zip(got, want, strict=True):
        close(g.states, w.states)
        close(g.last, w.last)
        if logprobs:
            close(g.logprobs, w.logprobs)
        else:
            assert g.logprobs is None
    assert got[0] is got[2] and got[4] is got[6]  # the same pair: one TokenStates


@pytest.mark.slow
def test_the_bundled_smollm2_states_equal_transformers(smollm_teacher) -> None:
    files = present(resolve("smollm2-135m"))
    numpy_teacher = array_teacher(read_card(files), Path(files.source))
    assert isinstance(numpy_teacher, ArrayTeacher) and numpy_teacher.layer == smollm_teacher.layer == 15
    messages = [
        [{"role": "user", "content": "What is the capital of Australia?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who won the 1987 Tour de France?"}],
    ]
    responses = ["The capital of Australia is Canberra.", "Sydney.", "Stephen Roche won the 1987 Tour de France."]
    pairs = pairs_of(smollm_teacher, messages, responses)
    for logprobs in (False, True):
        got, want = numpy_teacher.encode_ids(pairs, logprobs), smollm_teacher.encode_ids(pairs, logprobs)
        for g, w in zip(got, want, strict=True):
            close(g.states, w.states)
            close(g.last, w.last)
            if logprobs:
                np.testing.assert_allclose(g.logprobs, w.logprobs, atol=1e-3)


def test_the_placement_picks_numpy_for_one_prompt_on_cpu_in_float32() -> None:
    assert placement("cpu", "auto", one_prompt=True).engine == "numpy"
    assert placement("cpu", "float32").engine == "torch"  # a batch, serve, eval: torch's throughput
    assert placement("cpu", "bfloat16", one_prompt=True).engine == "torch"
    assert placement("cuda", "auto", cuda=True, one_prompt=True).engine == "torch"


@pytest.mark.slow
def test_only_a_bundled_llama_is_forced_in_numpy(tiny_folder) -> None:
    """SmolLM2 under the engine "numpy" is an ArrayTeacher; a model folder is not bundled, and Gemma-3 is not a plain
    Llama: both are forced in torch."""
    one = placement("cpu", "float32", one_prompt=True)
    assert isinstance(ready_teacher("smollm2-135m", one), ArrayTeacher)
    assert isinstance(ready_teacher(tiny_folder, one), HFTeacher)
    gemma = present(resolve("gemma3-270m"))
    assert array_teacher(read_card(gemma), Path(gemma.source)) is None
