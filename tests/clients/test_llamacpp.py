"""llama.cpp sampling of the embedded GGUF (white-box on CPU): the teacher's token ids, its law, its log-probs."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chi2_contingency, chisquare

from blackbox_wd.clients import llamacpp, local_sampler_for, local_sampler_name
from blackbox_wd.clients.llamacpp import LlamaCppSampler, new_slot_dir
from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.records import SamplingParams
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.embedded import ensure_gguf
from blackbox_wd.teachers.forcing import HFTeacher

COLOUR = [{"role": "user", "content": "Pick a colour."}]
CAPITAL = [{"role": "user", "content": "What is the capital of Australia?"}]
TOUR = [{"role": "user", "content": "Who won the 1987 Tour de France?"}]


@pytest.fixture(scope="module")
def sampler(smollm_teacher):
    return LlamaCppSampler(smollm_teacher, ensure_gguf())


def first_tokens(samples) -> list[int]:
    return [s.token_ids[0] for s in samples]


@torch.inference_mode()
def next_token_law(teacher: HFTeacher, messages, temperature: float, top_p: float) -> np.ndarray:
    """The HF model's law of the first token: softmax at the temperature, then the top-p nucleus, renormalised."""
    logits = teacher.model(torch.tensor([teacher.prompt_ids(messages)])).logits[0, -1].double()
    p = torch.softmax(logits / temperature, -1)
    order = p.argsort(descending=True)
    keep = order[: int((p[order].cumsum(0) < top_p).sum()) + 1]
    law = torch.zeros_like(p)
    law[keep] = p[keep] / p[keep].sum()
    return law.numpy()


def binned(tokens: list[int], law: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Observed counts and expected counts over the tokens expected >= 5 times, the rest in one bin."""
    n = len(tokens)
    cells = np.flatnonzero(law * n >= 5)
    observed = np.array([tokens.count(int(c)) for c in cells] + [sum(t not in set(cells) for t in tokens)])
    expected = np.append(law[cells] * n, n - law[cells].sum() * n)
    return observed, expected


def test_embedded_gguf_targets_on_cpu_are_drawn_by_llamacpp(smollm_teacher, tiny_llama):
    settings = Settings(device="cpu")
    assert local_sampler_name(settings, "cpu") == "llama.cpp"
    assert local_sampler_name(settings, "cuda") == "transformers"  # HF generate on GPU
    assert local_sampler_name(Settings(target="deepseek-chat"), "cpu") is None
    drawn = local_sampler_for(settings, smollm_teacher)
    assert isinstance(drawn, LlamaCppSampler) and drawn.teacher is smollm_teacher
    assert drawn.host is LlamaCppSampler(smollm_teacher, ensure_gguf()).host  # one server a process
    scorer = Detector(smollm_teacher, drawn, settings)
    assert scorer.own_ids and scorer.reported.as_dict()["sampler"] == "llama.cpp"
    tiny = HFTeacher(*tiny_llama, name="tiny")
    assert Detector(tiny, LocalSampler(tiny), settings).reported.as_dict()["sampler"] == "transformers"
    assert Detector(tiny, LocalSampler(tiny), settings).fingerprint != scorer.fingerprint


def test_samples_are_the_teachers_token_ids_with_the_models_log_probs(sampler, smollm_teacher):
    """The ids decode to the text with the teacher's tokenizer, hold no stop token, and their log-probs are the
    teacher's own for those tokens (Q4_1 kernels against the dequantised fp32 weights: within 0.1 nats on average)."""
    samples = sampler.sample(TOUR, SamplingParams(k=4, temperature=0.5, max_tokens=40, seed=0)).samples
    prompt = smollm_teacher.prompt_ids(TOUR)
    forced = smollm_teacher.encode_ids([(prompt, list(s.token_ids)) for s in samples], logprobs=True)
    stops = {smollm_teacher.tokenizer.eos_token_id, smollm_teacher.tokenizer.convert_tokens_to_ids("<|im_end|>")}
    for s, ts in zip(samples, forced, strict=True):
        assert s.text == smollm_teacher.tokenizer.decode(s.token_ids, skip_special_tokens=True) and s.text
        assert not stops & set(s.token_ids) and len(s.token_logprobs) == len(s.token_ids)
        gap = np.abs(np.array(s.token_logprobs) - ts.logprobs)
        assert gap.mean() < 0.1, gap
    assert len({s.token_ids for s in samples}) > 1


def test_pieces_of_characters_keep_their_token_ids(sampler, smollm_teacher):
    """Emojis take several byte tokens each: every id comes back (the text is theirs), the end-of-turn id does not;
    a sample whose log-probs llama.cpp left incomplete carries none (LNE then asks the teacher)."""
    emojis = [{"role": "user", "content": "Reply with three emojis."}]
    samples = sampler.sample(emojis, SamplingParams(k=8, temperature=1.0, max_tokens=40, seed=3)).samples
    stops = {smollm_teacher.tokenizer.eos_token_id, smollm_teacher.tokenizer.convert_tokens_to_ids("<|im_end|>")}
    for s in samples:
        assert s.text == smollm_teacher.tokenizer.decode(s.token_ids) and not stops & set(s.token_ids)
        assert s.token_logprobs is None or len(s.token_logprobs) == len(s.token_ids)
    pieces = [s for s in samples if "\ufffd" in "".join(smollm_teacher.tokenizer.decode([t]) for t in s.token_ids)]
    assert pieces and all(s.token_logprobs is None for s in pieces)
    assert any(s.token_logprobs is not None for s in samples)


def test_the_law_of_the_samples_is_the_hf_samplers(sampler, smollm_teacher):
    """First tokens of 240 draws each, at T=1 with top-p 0.9: llama.cpp and transformers both fit the model's law
    and each other; draws at T=0.5 do not fit it (the test can tell a different law)."""
    params = SamplingParams(k=240, temperature=1.0, top_p=0.9, max_tokens=1, seed=1)
    law = next_token_law(smollm_teacher, COLOUR, 1.0, 0.9)
    ours = first_tokens(sampler.sample(COLOUR, params).samples)
    hf = first_tokens(LocalSampler(smollm_teacher).sample(COLOUR, params).samples)
    for drawn in (ours, hf):
        assert chisquare(*binned(drawn, law)).pvalue > 1e-3
    observed = np.stack([binned(ours, law)[0], binned(hf, law)[0]])
    assert chi2_contingency(observed[:, observed.sum(0) > 0]).pvalue > 1e-3
    colder = first_tokens(
        sampler.sample(COLOUR, SamplingParams(k=240, temperature=0.5, top_p=0.9, max_tokens=1, seed=1)).samples
    )
    assert chisquare(*binned(colder, law)).pvalue < 1e-3


def test_a_prompts_samples_depend_on_its_seed_only(sampler):
    """The same call twice draws the same; a prompt alone, after another, with greedy answers, draws the same
    samples; another seed draws otherwise."""
    params = SamplingParams(k=4, temperature=1.0, max_tokens=6, seed=11)
    ids = lambda sets: [[s.token_ids for s in ss.samples] for ss in sets]  # noqa: E731
    alone = ids(sampler.sample_many([(COLOUR, 4)], params)) + ids(sampler.sample_many([(CAPITAL, 4)], params))
    assert ids(sampler.sample_many([(COLOUR, 4), (CAPITAL, 4)], params)) == alone
    assert ids(sampler.sample_many([(CAPITAL, 4), (COLOUR, 4)], params)) == alone[::-1]
    together = sampler.sample_many([(CAPITAL, 4), (COLOUR, 4)], params, answers=True)
    assert ids(together) == alone[::-1]
    assert (
        ids(sampler.sample_many([(COLOUR, 4)], SamplingParams(k=4, temperature=1.0, max_tokens=6, seed=12)))
        != alone[:1]
    )
    assert len(set(alone[0])) > 1


def test_greedy_answers_ride_along(sampler):
    """Each prompt's greedy answer comes with its samples, and is what temperature 0 draws."""
    params = SamplingParams(k=3, temperature=1.0, max_tokens=8, seed=2)
    together = sampler.sample_many([(COLOUR, 3), (CAPITAL, 3)], params, answers=True)
    greedy = sampler.sample_many([(COLOUR, 1), (CAPITAL, 1)], SamplingParams(k=1, temperature=0.0, max_tokens=8))
    for t, g in zip(together, greedy, strict=True):
        assert t.answer.token_ids == g.samples[0].token_ids and len(t.samples) == 3
    assert together[1].answer.text.startswith("The capital of Australia is")


SHOTS = [
    {"role": "user", "content": "Pick a fruit."},
    {"role": "assistant", "content": "Apple"},
    {"role": "user", "content": "Pick an animal."},
    {"role": "assistant", "content": "Otter"},
]


def test_earlier_turns_are_the_prompts_start_up_to_its_last_message(sampler, smollm_teacher):
    """Every message but the last, rendered as a finished chat, when the prompt starts with it and it is long
    enough; a one-message prompt has none."""
    ids = smollm_teacher.prompt_ids([*SHOTS, *COLOUR])
    head = sampler.earlier_turns([*SHOTS, *COLOUR], ids)
    assert 32 <= len(head) < len(ids) and ids[: len(head)] == head
    rest = smollm_teacher.tokenizer.decode(ids[len(head) :])
    assert rest == "<|im_start|>user\nPick a colour.<|im_end|>\n<|im_start|>assistant\n"
    assert sampler.earlier_turns(COLOUR, smollm_teacher.prompt_ids(COLOUR)) == []


def test_earlier_turns_are_read_once_and_restored_for_each_request(smollm_teacher):
    """Two prompts after the same turns, two stages each: the turns are read and saved once, restored before each
    of the four requests, which read only the prompts' rest from the cache; a one-message prompt is read afresh."""
    sent: list[tuple[str, dict]] = []

    class Recording(LlamaCppSampler):
        def post(self, path, body):
            reply = super().post(path, body)
            sent.append((path, reply if path == "/completion" else body))
            return reply

    rec = Recording(smollm_teacher, ensure_gguf(), slots=4)
    prompts = [[*SHOTS, *COLOUR], [*SHOTS, *CAPITAL]]
    head = len(rec.earlier_turns(prompts[0], smollm_teacher.prompt_ids(prompts[0])))
    for start in (0, 3):
        rec.sample_many([(m, 3) for m in prompts], SamplingParams(3, 1.0, 1.0, 4, 0, start))
    paths = [p for p, _ in sent]
    assert paths.count("/slots/0?action=save") == 1 and paths.count("/slots/0?action=restore") == 4
    first = [r for p, r in sent if p == "/completion"]
    assert first[0]["timings"]["prompt_n"] == head and first[0]["timings"]["cache_n"] == 0  # the turns, alone
    for reply in first[1:]:
        assert reply[0]["timings"]["cache_n"] == head  # each request reads the turns from the restored slot
    sent.clear()
    rec.sample_many([(COLOUR, 3)], SamplingParams(3, 1.0, 1.0, 4, 0))
    assert [p for p, _ in sent] == ["/completion"] and sent[0][1][0]["timings"]["cache_n"] == 0


def test_only_the_turns_used_last_stay_saved(smollm_teacher, monkeypatch):
    """With room for one saved reading, a second conversation's turns replace the first's file, and the first
    turns are read and saved again when they come back; the samples are the same either way."""
    monkeypatch.setattr(llamacpp, "SAVED", 1)
    rec = LlamaCppSampler(smollm_teacher, ensure_gguf(), slots=3)
    trees, birds = ([{**m, "content": m["content"].replace("Otter", x)} for m in SHOTS] for x in ("Oak", "Wren"))
    params = SamplingParams(2, 1.0, 1.0, 4, 0)
    saves = []
    rec.post = lambda path, body, post=rec.post: saves.append(path) or post(path, body)  # type: ignore[method-assign]
    first = rec.sample_many([([*trees, *COLOUR], 2)], params)[0]
    assert len(list(rec.host.slot_dir.glob("*.bin"))) == 1
    rec.sample_many([([*birds, *COLOUR], 2)], params)
    assert len(list(rec.host.slot_dir.glob("*.bin"))) == 1 and len(rec.host.saved) == 1
    again = rec.sample_many([([*trees, *COLOUR], 2)], params)[0]
    assert saves.count("/slots/0?action=save") == 3
    assert [s.token_ids for s in again.samples] == [s.token_ids for s in first.samples]


def test_a_killed_processs_slot_folder_is_removed_by_a_later_one(tmp_path, monkeypatch):
    """A process killed with kill -9 leaves its folder of saved slots; the next process to make one removes it once
    its lock is free and STALE_S old, and leaves the folders of live processes."""
    code = (
        "import time; from blackbox_wd.clients.llamacpp import new_slot_dir; "
        "folder, lock = new_slot_dir(); print(folder, flush=True); time.sleep(300)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp_path)}
    )
    left = Path(child.stdout.readline().strip())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stale = time.time() - 2 * llamacpp.STALE_S
    try:
        os.utime(left / ".lock", (stale, stale))
        mine = new_slot_dir()
        assert left.is_dir()  # its process lives
    finally:
        child.kill()
        child.wait()
    os.utime(left / ".lock")
    assert new_slot_dir()[0].is_dir() and left.is_dir()  # lock free but new: it may be a process starting
    os.utime(left / ".lock", (stale, stale))
    later = new_slot_dir()
    assert not left.exists() and mine[0].is_dir() and later[0].is_dir()
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == ["bbwd"] * 3


def test_more_samples_than_slots(smollm_teacher):
    """K over the slots goes in several requests, sample i still drawn with seed base + i."""
    small = LlamaCppSampler(smollm_teacher, ensure_gguf(), slots=3)
    many = small.sample(COLOUR, SamplingParams(k=7, temperature=1.0, max_tokens=3, seed=4)).samples
    assert len(many) == 7 and len({s.token_ids for s in many}) > 1
    three = small.sample(COLOUR, SamplingParams(k=3, temperature=1.0, max_tokens=3, seed=4)).samples
    assert [s.token_ids for s in three] == [s.token_ids for s in many[:3]]


def test_lne_takes_the_samplers_log_probs_and_the_teacher_stops_at_the_layer(sampler, smollm_teacher):
    scorer = Detector(smollm_teacher, sampler, Settings(k=3, device="cpu"))
    sets = sampler.sample_many([(CAPITAL, 3)], SamplingParams(k=3, temperature=1.0, max_tokens=12, seed=0))
    result = scorer.score_many([(CAPITAL, sets[0])])[0]
    assert result.lne_source == "target"
    by_hand = -np.mean([np.mean(s.token_logprobs) for s in sets[0].samples])
    assert result.baselines["lne"] == pytest.approx(by_hand)
    assert all(s.logprobs is None for s in scorer.teacher_pass([(CAPITAL, sets[0])])[0].states)
