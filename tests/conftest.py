"""Shared fixtures: the real embedded teacher (loaded once per session) and a tiny random Llama."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tiny_vocab import WORDS

NO_GPU = "needs a CUDA GPU, and this machine has none: run on a GPU machine (bench/RESULTS.md, 'The teacher on a GPU')"


# Two workers share CI's two cores: every process of the run (workers, and the bbwd processes and servers tests
# start) keeps to one thread for torch, exact OT and llama.cpp (``cpus.cpu_threads``), since threads that spin on a
# shared core slow one another many times over. Set OMP_NUM_THREADS to run the tests with more.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The recorded data sets live beside the repository, not in the package: a short name (``bbwd eval --data nq``) is
# looked up in $BBWD_DATA_DIR, set here (and so for every process a test starts) where the run has not set it.
os.environ.setdefault("BBWD_DATA_DIR", str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))

# The longest files, run first: each goes whole to one worker (``--dist loadfile``), so a long file started last
# leaves the other worker idle at the end (test_ray_engine.py alone runs about 6 minutes idle, 12 on two loaded cores)
LONGEST_FILES = ("test_ray_engine.py", "test_bench.py")


def pytest_collection_modifyitems(config, items):
    """The longest files first (``LONGEST_FILES``), the others in their order; tests marked ``gpu`` are skipped,
    with the reason, where torch sees no CUDA device (``-ra`` prints it)."""
    import torch

    rank = {name: n for n, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
    if torch.cuda.is_available():
        return
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.skip(reason=NO_GPU))


def pytest_terminal_summary(terminalreporter):
    """One line that says how many GPU tests did not run here, and why."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if NO_GPU in str(r.longrepr)]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} GPU tests did not run: {NO_GPU}", yellow=True)


@pytest.fixture(scope="session")
def smollm_teacher():
    """The embedded SmolLM2-135M teacher on CPU (downloaded and converted on first use)."""
    from blackbox_wd.teachers.hf import load_teacher

    return load_teacher("smollm2-135m", device="cpu")


@pytest.fixture(scope="session")
def tiny_llama():
    """A randomly initialised 4-layer Llama with a word-level tokenizer and a chat template."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<user>", "<assistant>", "<end>", *WORDS]
    vocab = {w: i for i, w in enumerate(words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="<eos>",
        additional_special_tokens=["<user>", "<assistant>", "<end>"],
    )
    tok.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} <end> {% endfor %}"
        "{% if add_generation_prompt %}<assistant> {% endif %}"
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(words),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = [1, vocab["<end>"]]
    model.generation_config.pad_token_id = 0
    return model, tok


@pytest.fixture(scope="session")
def tiny_folder(tiny_llama, tmp_path_factory) -> str:
    """The tiny random Llama saved as a model folder, for what loads a teacher by name (a new process, a Ray
    actor)."""
    model, tok = tiny_llama
    folder = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def save_tiny_nli(folder, entailment_bias: float = 0.0):
    """A randomly initialised 2-layer BERT NLI classifier (CONTRADICTION, NEUTRAL, ENTAILMENT) and
    its WordPiece tokenizer, saved to ``folder``; ``entailment_bias`` is added to the ENTAILMENT logit."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "london"]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(words),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        initializer_range=1.0,
        id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
        label2id={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2},
    )
    model = BertForSequenceClassification(config).eval()
    with torch.no_grad():
        model.classifier.bias[2] += entailment_bias
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_nli_dir(tmp_path_factory):
    """A folder with a tiny random NLI model (see ``save_tiny_nli``) that says yes to some pairs, no to others."""
    return save_tiny_nli(tmp_path_factory.mktemp("nli") / "tiny-nli", entailment_bias=-4.0)


def break_teacher_pass_on(monkeypatch, word: str, message: str = "boom") -> None:
    """Make every teacher pass that holds a prompt containing ``word`` raise RuntimeError(message)."""
    import blackbox_wd.run.stages as pipeline_module

    real = pipeline_module.teacher_pass

    def fragile(teacher, items, **kw):
        if any(word in messages[0]["content"] for messages, _ in items):
            raise RuntimeError(message)
        return real(teacher, items, **kw)

    monkeypatch.setattr(pipeline_module, "teacher_pass", fragile)


def direct_sentences(teacher, messages, answer, samples, sentences=None):
    """The answer's sentences and their scores computed directly from the package's functions: the answer and the
    samples forced in one call, the answer's token costs to each sample, its spans and tokens' sentences."""
    from blackbox_wd.measure.sentences import locate, split, token_sentence
    from blackbox_wd.measure.transport import token_costs_to_each
    from blackbox_wd.measure.wd import sentence_scores

    states = teacher.encode(messages, [answer, *samples])
    costs = token_costs_to_each(states[0].states, [s.states for s in states[1:]])
    spans = split(answer) if sentences is None else locate(answer, sentences)
    offsets = teacher.reader.text_offsets(answer, teacher.response_ids(answer))
    return [s.text for s in spans], sentence_scores(costs, token_sentence(offsets, spans), len(spans))


@pytest.fixture(autouse=True)
def own_state_cache(tmp_path, monkeypatch):
    """Every test's teacher-state cache (``bbwd eval``) is its own, never the user's."""
    from blackbox_wd.teachers import statecache

    monkeypatch.setattr(statecache, "default_states_dir", lambda: tmp_path / "bbwd-states")


def chromium() -> str:
    """The system Chromium's path; the test fails (never skips) without it."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: apt-get install -y chromium (the report page's tests need it)")
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """The system Chromium under Playwright (its own browser download is never used), one a test module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        yield b
        b.close()
