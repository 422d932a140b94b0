"""Teacher forcing on a tiny random Llama: exactly the response tokens' states at layer floor(L/2)."""

import numpy as np
import pytest
import torch

from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import SamplingParams
from blackbox_wd.teachers.forcing import HFTeacher
from blackbox_wd.teachers.hf import resolve_device
from blackbox_wd.teachers.projection import projection_matrix

MESSAGES = [{"role": "user", "content": "what is the capital of france"}]


@pytest.fixture
def teacher(tiny_llama):
    model, tok = tiny_llama
    return HFTeacher(model, tok, name="tiny")


def plain_hidden(model, ids, layer):
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    return out.hidden_states[layer][0].double().numpy(), torch.log_softmax(out.logits[0].double(), -1).numpy()


def test_layer_is_floor_half(teacher):
    assert teacher.n_layers == 4 and teacher.layer == 2


def test_prompt_ids_follow_chat_template(teacher):
    tok = teacher.tokenizer
    assert tok.convert_ids_to_tokens(teacher.prompt_ids(MESSAGES)) == [
        "<user>",
        "what",
        "is",
        "the",
        "capital",
        "of",
        "france",
        "<end>",
        "<assistant>",
    ]


def test_states_are_exactly_the_response_tokens(teacher):
    response = "the capital of france is paris"
    (ts,) = teacher.encode(MESSAGES, [response])
    prompt = teacher.prompt_ids(MESSAGES)
    resp = teacher.response_ids(response)
    assert len(resp) == 6 and ts.n_tokens == 6 and ts.states.shape == (6, 128)
    # plain forward of the whole turn, EOS and end-of-turn included: only the response rows are kept
    eot = teacher.tokenizer.convert_tokens_to_ids(["<end>", "<eos>"])
    hidden, _ = plain_hidden(teacher.model, prompt + resp + eot, teacher.layer)
    expected = hidden[len(prompt) : len(prompt) + len(resp)]
    proj = projection_matrix(32)
    np.testing.assert_allclose(ts.states, expected @ proj, atol=1e-5)
    np.testing.assert_allclose(ts.last, expected[-1], atol=1e-5)
    # neither the last prompt token nor the end-of-turn token is in the set
    assert not np.allclose(ts.states[0], hidden[len(prompt) - 1] @ proj, atol=1e-3)
    assert not np.allclose(ts.states[-1], hidden[len(prompt) + len(resp)] @ proj, atol=1e-3)


def test_batched_padded_equals_single(teacher):
    responses = ["paris", "it is rome a big city", "the capital is paris yes"]
    batched = teacher.encode(MESSAGES, responses)
    for r, ts in zip(responses, batched, strict=True):
        (single,) = teacher.encode(MESSAGES, [r])
        np.testing.assert_allclose(ts.states, single.states, atol=1e-5)
    teacher.token_budget = 1  # one sequence per forward pass
    for ts, again in zip(batched, teacher.encode(MESSAGES, responses), strict=True):
        np.testing.assert_allclose(ts.states, again.states, atol=1e-5)


def test_logprob_pass_gives_same_states_and_plain_logprobs(teacher):
    response = "paris is a big city"
    (fast,) = teacher.encode(MESSAGES, [response])
    (full,) = teacher.encode(MESSAGES, [response], logprobs=True)
    np.testing.assert_allclose(fast.states, full.states, atol=1e-6)
    prompt, resp = teacher.prompt_ids(MESSAGES), teacher.response_ids(response)
    _, logp = plain_hidden(teacher.model, prompt + resp, teacher.layer)
    expected = [logp[len(prompt) - 1 + t, tok] for t, tok in enumerate(resp)]
    np.testing.assert_allclose(full.logprobs, expected, atol=1e-5)


def test_projection_is_fixed_and_seeded():
    a, b = projection_matrix(576), projection_matrix(576)
    assert a.shape == (576, 128) and np.array_equal(a, b)
    assert not np.array_equal(a, projection_matrix(576, seed=1))
    assert abs(a.std() - 128**-0.5) < 0.01 * 128**-0.5 * 10


def test_empty_response_is_an_error(teacher):
    with pytest.raises(BBWDError, match="response 1 is empty"):
        teacher.encode(MESSAGES, ["paris", ""])


def test_over_long_input_is_an_error(teacher):
    with pytest.raises(BBWDError, match="over the teacher's context of 64"):
        teacher.encode(MESSAGES, ["paris " * 80])


def test_layer_out_of_range(tiny_llama):
    with pytest.raises(BBWDError, match="layer 9 out of range"):
        HFTeacher(*tiny_llama, layer=9)


def test_local_sampler_k_seeded_no_eos(teacher):
    sampler = LocalSampler(teacher)
    params = SamplingParams(k=4, temperature=1.0, max_tokens=6, seed=3)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    first = sampler.sample(MESSAGES, params).samples
    assert torch.rand(1) == before  # the global RNG was not consumed
    again = sampler.sample(MESSAGES, params).samples
    assert [s.token_ids for s in first] == [s.token_ids for s in again]
    assert len(first) == 4
    stops = {1, teacher.tokenizer.convert_tokens_to_ids("<end>")}
    for s in first:
        assert 1 <= len(s.token_ids) <= 6 and not stops & set(s.token_ids)
    other = sampler.sample(MESSAGES, SamplingParams(k=4, temperature=1.0, max_tokens=6, seed=4)).samples
    assert [s.token_ids for s in other] != [s.token_ids for s in first]


def test_inverse_cdf_draw_follows_the_softmax() -> None:
    from blackbox_wd.clients.local import InverseCDFDraw

    n = 40_000
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0])
    scores = torch.log(probs).repeat(n, 1)  # the last token has probability 0 (score -inf)
    gens = lambda: [torch.Generator().manual_seed(i) for i in range(n)]  # noqa: E731 - one per row
    out = InverseCDFDraw(gens())(torch.zeros(n, 1, dtype=torch.long), scores.clone())
    drawn = out.argmax(dim=-1)
    assert torch.all(out[torch.arange(n), drawn] == float("inf"))
    assert torch.isinf(out).sum() == n + n  # one +inf per row, the -inf of token 3 kept
    freq = torch.bincount(drawn, minlength=4).double() / n
    # 4 standard errors of a proportion at n = 40,000 is at most 0.01.
    assert torch.allclose(freq, probs.double(), atol=0.01)
    assert freq[3] == 0.0
    again = InverseCDFDraw(gens())(None, scores.clone()).argmax(dim=-1)
    assert torch.equal(drawn, again)


def test_local_samples_depend_on_seed_and_prompt_only(teacher):
    """A prompt's samples are the same alone, after another prompt, or in another order."""
    sampler = LocalSampler(teacher)
    params = SamplingParams(k=3, temperature=1.0, max_tokens=5, seed=11)
    a = [{"role": "user", "content": "what is the capital of france"}]
    b = [{"role": "user", "content": "is rome a big city"}]
    ids = lambda sets: [[s.token_ids for s in ss.samples] for ss in sets]  # noqa: E731
    alone_a, alone_b = ids(sampler.sample_many([(a, 3)], params)), ids(sampler.sample_many([(b, 3)], params))
    assert ids(sampler.sample_many([(a, 3), (b, 3)], params)) == alone_a + alone_b
    assert ids(sampler.sample_many([(b, 3), (a, 3)], params)) == alone_b + alone_a
    assert ids(sampler.sample_many([(b, 2), (a, 3)], params)) == [alone_b[0][:2], alone_a[0]]
    assert alone_a != alone_b  # the prompt enters the seed, not only the position in the call


@pytest.mark.parametrize(
    ("device", "cuda", "want"),
    [("auto", True, "cuda:0"), ("cuda", True, "cuda:0"), ("cuda:1", True, "cuda:1"), ("auto", False, "cpu")],
)
def test_a_device_resolves_to_the_name_its_weights_report(device, cuda, want):
    """What a Ray driver resolves from its cluster (``cuda`` given) is what the local weights report: "cuda:0" for
    "auto" and "cuda" (torch puts "cuda" there), so both engines' rows say the same device."""
    assert resolve_device(device, cuda) == want


def test_a_gpu_named_without_one_is_an_error():
    with pytest.raises(BBWDError, match="device 'cuda' asked for but no CUDA GPU is available"):
        resolve_device("cuda", False)
