"""The shared-prefix teacher pass and sampler give what a plain per-response forward gives.

Each prompt runs once (left-padded with others, its key/value cache kept) and its responses run
after it on a copy of that cache (right-padded). The reference is one unpadded forward of
prompt + response through the whole model, ``hidden_states[layer]`` at the response tokens.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import TemperatureLogitsWarper

from blackbox_wd.clients.local import InverseCDFDraw, LocalSampler, row_generators
from blackbox_wd.measure.transport import pairwise_w2
from blackbox_wd.records import SamplingParams
from blackbox_wd.run.stages import token_floor
from blackbox_wd.teachers import levels
from blackbox_wd.teachers.forcing import HFTeacher
from blackbox_wd.teachers.levels import Levels
from blackbox_wd.teachers.pad import pad_batch
from blackbox_wd.teachers.prefix import SHARED_MIN, SharedMemo, shared_length

PROMPTS = [
    [{"role": "user", "content": "what"}],
    [{"role": "user", "content": "what is the capital of france"}],
    [{"role": "system", "content": "a big city"}, {"role": "user", "content": "is it rome or paris"}],
]
RESPONSES = ["paris", "it is rome a big city", "the capital is paris yes", "no it is small", "paris"]


def test_a_packed_pass_holds_the_valid_tokens_in_row_order():
    levels = Levels()
    valid = torch.tensor([[True, True, False], [True, False, False], [True, True, True]])
    levels.step(torch.zeros(3, 3, dtype=torch.long), valid, packed=True)
    rows = torch.arange(9.0).view(3, 3, 1) + 1
    packed = levels.pack(rows)
    assert packed[0, :, 0].tolist() == [1.0, 2.0, 4.0, 7.0, 8.0, 9.0]
    assert levels.unpack(packed)[..., 0].tolist() == [[1.0, 2.0, 0.0], [4.0, 0.0, 0.0], [7.0, 8.0, 9.0]]


@pytest.fixture
def teacher(tiny_llama):
    return HFTeacher(*tiny_llama, name="tiny")


@torch.inference_mode()
def plain(teacher, prompt, response):
    """Projected states and log-probs of the response from one unpadded full forward."""
    out = teacher.model(torch.tensor([prompt + response], device=teacher.device), output_hidden_states=True)
    hidden = out.hidden_states[teacher.layer][0, len(prompt) :].double().cpu().numpy()
    logp = torch.log_softmax(out.logits[0].double(), -1)
    lp = [logp[len(prompt) - 1 + t, tok].item() for t, tok in enumerate(response)]
    return hidden @ teacher.projection, np.array(lp)


def pairs_of(teacher):
    return [(teacher.prompt_ids(m), teacher.response_ids(r)) for m in PROMPTS for r in RESPONSES]


@pytest.mark.parametrize("logprobs", [False, True])
def test_mixed_prompt_lengths_equal_plain_forwards(teacher, logprobs):
    pairs = pairs_of(teacher)
    assert len({len(p) for p, _ in pairs}) == 3 and len({len(r) for _, r in pairs}) == 4
    for (prompt, response), ts in zip(pairs, teacher.encode_ids(pairs, logprobs=logprobs), strict=True):
        states, lp = plain(teacher, prompt, response)
        np.testing.assert_allclose(ts.states, states, atol=1e-5)
        if logprobs:
            np.testing.assert_allclose(ts.logprobs, lp, atol=1e-5)


@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_side_and_budget_change_nothing(teacher, side):
    pairs = pairs_of(teacher)
    teacher.tokenizer.padding_side = side
    try:
        together = teacher.encode_ids(pairs, logprobs=True)  # one prefill batch, one response batch
        teacher.token_budget = 1  # every prompt and every response alone: no padding at all
        alone = teacher.encode_ids(pairs, logprobs=True)
    finally:
        teacher.tokenizer.padding_side, teacher.token_budget = "right", 16384
    for a, b in zip(together, alone, strict=True):
        np.testing.assert_allclose(a.states, b.states, atol=1e-5)
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)


def test_each_prompt_and_distinct_response_runs_once(teacher):
    pairs = pairs_of(teacher)
    before, before_run = teacher.tokens.real, teacher.tokens.padded
    states = teacher.encode_ids(pairs)
    assert teacher.tokens.real - before == token_floor(pairs)
    assert teacher.tokens.padded - before_run == token_floor(pairs)  # packed passes: the layers run no padding
    assert token_floor(pairs) == sum(len(teacher.prompt_ids(m)) for m in PROMPTS) + 3 * sum(
        len(teacher.response_ids(r)) for r in RESPONSES[:4]
    )  # "paris" twice: once per prompt
    assert states[0] is states[4] and states[5] is states[9]  # identical responses share their states
    d = pairwise_w2([s.states for s in states[:5]])
    assert d[0, 4] == d[4, 0] == 0.0 and (d[np.triu_indices(5, 1)] > 0).sum() == 9


def test_sliding_window_teacher_equals_plain_forward(tiny_llama):
    """Gemma-3's local layers keep only a window of keys: prompts longer than it still match."""
    teacher = HFTeacher(tiny_gemma(tiny_llama[1]), tiny_llama[1], name="tiny-gemma")
    pairs = pairs_of(teacher)
    assert max(len(p) for p, _ in pairs) > 2 * teacher.model.config.sliding_window
    for (prompt, response), ts in zip(pairs, teacher.encode_ids(pairs, logprobs=True), strict=True):
        states, lp = plain(teacher, prompt, response)
        np.testing.assert_allclose(ts.states, states, atol=1e-5)
        np.testing.assert_allclose(ts.logprobs, lp, atol=1e-5)


@torch.inference_mode()
def test_prefilled_sampling_draws_what_a_full_generate_draws(teacher):
    sampler = LocalSampler(teacher)
    params = SamplingParams(k=4, temperature=1.0, max_tokens=6, seed=5)
    requests = [(m, 4) for m in PROMPTS]
    got = [[s.token_ids for s in ss.samples] for ss in sampler.sample_many(requests, params)]
    # reference: every row's whole prompt through generate, no cache given
    pad = sampler.pad_id()
    ids, mask = pad_batch([teacher.prompt_ids(m) for m, k in requests for _ in range(k)], pad, left=True)
    out = teacher.model.generate(
        ids,
        attention_mask=mask,
        do_sample=False,
        logits_processor=[InverseCDFDraw(row_generators(requests, params.seed))],
        temperature=None,
        top_p=None,
        top_k=None,
        max_new_tokens=6,
        min_new_tokens=1,
        pad_token_id=pad,
    )
    rows = [s.token_ids for s in sampler.samples(out[:, ids.shape[1] :].tolist())]
    assert got == [rows[0:4], rows[4:8], rows[8:12]]
    assert len({r for rs in got for r in rs}) > 3  # real draws, not one repeated answer


def test_greedy_answers_ride_along_with_the_samples(teacher):
    """One call draws each prompt's K samples and its greedy answer: the same as drawing them apart."""
    sampler = LocalSampler(teacher)
    params = SamplingParams(k=3, temperature=1.0, max_tokens=6, seed=2)
    requests = [(m, 3) for m in PROMPTS]
    together = sampler.sample_many(requests, params, answers=True)
    apart = sampler.sample_many(requests, params)
    greedy = sampler.sample_many([(m, 1) for m in PROMPTS], SamplingParams(k=1, temperature=0.0, max_tokens=6))
    for t, a, g in zip(together, apart, greedy, strict=True):
        assert [s.token_ids for s in t.samples] == [s.token_ids for s in a.samples]
        assert t.answer.token_ids == g.samples[0].token_ids and a.answer is None
    assert len({t.answer.token_ids for t in together}) > 1


# Few-shot prompts: the same exemplar turns (>= SHARED_MIN tokens) before each prompt's own question.
SHOTS = [
    {"role": "user", "content": "what is the capital of france"},
    {"role": "assistant", "content": "paris"},
    {"role": "user", "content": "is rome a big city"},
    {"role": "assistant", "content": "yes it is a big city"},
    {"role": "user", "content": "is paris small"},
    {"role": "assistant", "content": "no"},
]
FEW_SHOT = [
    SHOTS + [{"role": "user", "content": q}]
    for q in ("what", "is it rome or paris", "what is the capital of rome", "is the city a big city yes or no")
]


def few_shot_pairs(teacher):
    return [(teacher.prompt_ids(m), teacher.response_ids(r)) for m in FEW_SHOT for r in RESPONSES[:4]]


def test_few_shot_prompts_share_a_long_prefix(teacher):
    prompts = [teacher.prompt_ids(m) for m in FEW_SHOT]
    n = shared_length(prompts)
    assert n >= SHARED_MIN and all(p[:n] == prompts[0][:n] for p in prompts)
    assert len({tuple(p[: n + 1]) for p in prompts}) > 1  # the longest common prefix
    assert shared_length(prompts[:1] + [teacher.prompt_ids(m) for m in PROMPTS]) == 0  # nothing long in common


@pytest.mark.parametrize("logprobs", [False, True])
def test_shared_prefix_read_once_equals_each_prompt_alone(teacher, logprobs):
    """The exemplars run once for all prompts; states and log-probs equal plain per-response forwards."""
    pairs = few_shot_pairs(teacher)
    prompts = {tuple(p) for p, _ in pairs}
    n = shared_length(list(prompts))
    before = teacher.tokens.real
    got = teacher.encode_ids(pairs, logprobs=logprobs)
    assert teacher.tokens.real - before == token_floor(pairs) - (len(prompts) - 1) * n  # the prefix read once
    for (prompt, response), ts in zip(pairs, got, strict=True):
        states, lp = plain(teacher, prompt, response)
        np.testing.assert_allclose(ts.states, states, atol=1e-5)
        if logprobs:
            np.testing.assert_allclose(ts.logprobs, lp, atol=1e-5)
    teacher.token_budget = 1  # every prompt alone: no shared prefix, no padding
    teacher.memo = SharedMemo(teacher.n_layers)
    try:
        alone = teacher.encode_ids(pairs, logprobs=logprobs)
    finally:
        teacher.token_budget = 16384
    for a, b in zip(got, alone, strict=True):
        np.testing.assert_allclose(a.states, b.states, atol=1e-5)


def test_the_shared_prefix_is_kept_for_the_next_call(teacher):
    """A whole-model pass keeps the shared prefix: the next call whose prompts start with it reads only their rests."""
    pairs = few_shot_pairs(teacher)
    n = shared_length(list({tuple(p) for p, _ in pairs}))
    first = teacher.encode_ids(pairs[:8], logprobs=True)  # two prompts: the prefix read and kept
    assert len(teacher.memo.tokens) == n
    before = teacher.tokens.real
    again = teacher.encode_ids(pairs[8:], logprobs=False)  # two other prompts: the prefix not read again
    assert teacher.tokens.real - before == token_floor(pairs[8:]) - 2 * n
    for (prompt, response), ts in zip(pairs, first + again, strict=True):
        np.testing.assert_allclose(ts.states, plain(teacher, prompt, response)[0], atol=1e-5)


def tiny_gemma(tok):
    """A randomly initialised Gemma-3 whose local layers see a window of 4 keys."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"] * 2,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    return Gemma3ForCausalLM(config).eval()


def test_sliding_window_teacher_shares_the_prefix_too(tiny_llama):
    """Padding between the shared prefix and a prompt's rest does not move Gemma-3's local windows."""
    teacher = HFTeacher(tiny_gemma(tiny_llama[1]), tiny_llama[1], name="tiny-gemma")
    pairs = few_shot_pairs(teacher)
    assert shared_length(list({tuple(p) for p, _ in pairs})) >= SHARED_MIN
    for (prompt, response), ts in zip(pairs, teacher.encode_ids(pairs, logprobs=True), strict=True):
        states, lp = plain(teacher, prompt, response)
        np.testing.assert_allclose(ts.states, states, atol=1e-5)
        np.testing.assert_allclose(ts.logprobs, lp, atol=1e-5)


@torch.inference_mode()
def full_generate(teacher, requests, params, answers=False):
    """Reference draw: every row's whole prompt through one stock ``generate`` (InverseCDFDraw), no cache."""
    sampler = LocalSampler(teacher)
    pad = sampler.pad_id()
    width = [k + answers for _, k in requests]
    prompts = [teacher.prompt_ids(m) for (m, _), w in zip(requests, width, strict=True) for _ in range(w)]
    ids, mask = (t.to(teacher.device) for t in pad_batch(prompts, pad, left=True))
    procs = [
        TemperatureLogitsWarper(params.temperature),
        InverseCDFDraw(row_generators(requests, params.seed, answers)),
    ]
    out = teacher.model.generate(
        ids,
        attention_mask=mask,
        do_sample=False,
        logits_processor=procs,
        temperature=None,
        top_p=None,
        top_k=None,
        max_new_tokens=params.max_tokens,
        min_new_tokens=1,
        pad_token_id=pad,
    )
    return [s.token_ids for s in sampler.samples(out[:, ids.shape[1] :].tolist())]


@pytest.mark.parametrize("model", ["llama", "gemma"])
def test_few_shot_sampling_draws_what_a_full_generate_draws(tiny_llama, model):
    """Shared exemplars read once, rows dropped as they stop: the same tokens as stock ``generate``."""
    tok = tiny_llama[1]
    teacher = HFTeacher(tiny_llama[0] if model == "llama" else tiny_gemma(tok), tok, name=model)
    sampler = LocalSampler(teacher)
    params = SamplingParams(k=4, temperature=0.7, max_tokens=8, seed=9)
    requests = [(m, 4) for m in FEW_SHOT[:3]]
    got = sampler.sample_many(requests, params, answers=True)
    flat = [t for ss in got for t in [*(s.token_ids for s in ss.samples), ss.answer.token_ids]]
    assert flat == full_generate(teacher, requests, params, answers=True)
    assert len(set(flat)) > 3  # real draws, not one repeated answer
    assert len(teacher.memo.tokens) >= SHARED_MIN  # kept: the calls below read only their own prompts
    alone = [sampler.sample_many([r], params, answers=True)[0] for r in requests]
    assert [[s.token_ids for s in ss.samples] for ss in got] == [[s.token_ids for s in ss.samples] for ss in alone]


def test_rows_that_stop_cost_no_more_steps(teacher):
    """A row leaves the batch at its stop token: the decoder runs each row's drawn tokens but its last."""
    sampler = LocalSampler(teacher)
    params = SamplingParams(k=6, temperature=1.0, max_tokens=12, seed=4)
    requests = [(m, 6) for m in FEW_SHOT]
    got = sampler.sample_many(requests, params)
    drawn = [len(s.token_ids) + (s.finish_reason == "stop") for ss in got for s in ss.samples]
    assert sampler.decoded == sum(n - 1 for n in drawn)
    assert min(drawn) < params.max_tokens and sampler.decoded < len(drawn) * (params.max_tokens - 1)


def test_answer_nll_and_cocoa_come_with_the_teachers_log_probs(teacher):
    """With the teacher's log-prob pass (LNE's) the judged answer's log-probs are a plain forward's, and answer_nll
    and cocoa follow from them and AnswerWD; without it the pass stops at the layer and they are None."""
    from blackbox_wd.clients.sampling import RecordedSamples
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings

    messages, answer = PROMPTS[1], "it is rome a big city"
    _, lp = plain(teacher, teacher.prompt_ids(messages), teacher.response_ids(answer))
    settings = Settings(k=4, device="cpu")
    result = Detector(teacher, RecordedSamples(), settings, lne=True).score(messages, RESPONSES[:4], answer)
    assert result.answer_nll == pytest.approx(-lp.mean(), abs=1e-5) and result.answer_nll > 0
    assert result.cocoa == pytest.approx(result.answer_nll * result.answer_wd, rel=1e-12)
    assert result.lne_source == "teacher"
    layer_only = Detector(teacher, RecordedSamples(), settings, lne=False).score(messages, RESPONSES[:4], answer)
    assert layer_only.answer_nll is None and layer_only.cocoa is None and layer_only.answer_wd > 0


def test_compiled_layers_run_in_bbwds_passes_only(tiny_llama, monkeypatch):
    """A GPU's compiled decoder layers (compiled here on CPU, by a backend that counts its graphs' runs): bbwd's
    passes run them and give the states and log-probs of one unpadded forward per response, shared head included;
    a plain forward of the same model runs the layers' own forward."""
    runs = []

    def counting(graph, _inputs):
        return lambda *args: runs.append(1) or graph.forward(*args)

    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: compile_(fn, backend=counting, **kw))
    teacher = HFTeacher(copy.deepcopy(tiny_llama[0]), tiny_llama[1], name="tiny")
    levels.compile_layers(teacher.model)
    levels.compile_layers(teacher.model)  # idempotent: one compiled forward a layer, around the layer's own
    assert all(layer.forward.args[0].__func__ is type(layer).forward for layer in teacher.model.get_decoder().layers)
    pairs = [(teacher.prompt_ids(m), teacher.response_ids(r)) for m in FEW_SHOT for r in RESPONSES]
    got = teacher.encode_ids(pairs, logprobs=True)
    # every layer of three passes (head, prompts, responses) ran the same compiled graphs: the parts of its frames
    # before and after the attention, which runs outside them
    assert runs and len(runs) % (3 * teacher.n_layers) == 0
    runs.clear()
    for (prompt, response), ts in zip(pairs, got, strict=True):
        states, lp = plain(teacher, prompt, response)
        np.testing.assert_allclose(ts.states, states, atol=1e-5)
        np.testing.assert_allclose(ts.logprobs, lp, atol=1e-5)
    assert runs == []
