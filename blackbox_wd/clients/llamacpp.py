"""White-box sampling with llama.cpp on the teacher's own GGUF file, in process (the ``xllamacpp`` wheel).

On CPU llama.cpp draws several times faster than transformers' ``generate`` from the same weights
(its quantised kernels, one KV cache shared by the samples of a prompt). The prompt is sent as the
teacher's own token ids and the samples come back as token ids of the same vocabulary, so the
teacher reuses them as they are; each token's log-probability under the model (softmax of the raw
logits, temperature 1) comes with it, which is what LNE needs, so the teacher never runs its head.

A prompt's K samples are one request with ``n_cmpl`` = K: the prompt is read once and its cache
shared by K sequences; sequence i draws with seed ``base + i``, where ``base`` is derived from
(seed, messages) as :func:`~blackbox_wd.clients.seeds.sample_seed` does. Requests go one at a
time, so a prompt's samples do not depend on what else is drawn with it (llama.cpp's kernels
round differently by batch size, and one rounding flip changes a sample from there on); drawn
with another K they can differ that way, so ``-k auto`` draws each round as the same request every time.
A prompt is never read from what another request left in llama.cpp's cache: a prompt whose start another
prompt left in a slot would be read from that cached start, computed in another batch, and its samples would
then depend on what the process drew before it (a resumed run drew other samples than a clean one). Yet a
long shared start (a system prompt, few-shot exemplar turns) should be read once, not once a request. So
a prompt's **earlier turns** (every message but its last, as the chat template renders them: a function of
the prompt alone) are read once per process from an empty slot, in a request of their own, and saved to a
file; each request of a prompt with those turns restores that file into slot 0 and reads only the rest
(``cache_prompt`` on, the slot pinned). Its samples then depend on the prompt and the seed alone, and the
shared start costs one file read. The files of the ``SAVED`` turns used last are kept (a server sees a new
conversation's turns with each of its requests; each file holds the turns' KV cells, megabytes), an older one is
deleted and read again when it comes back. A prompt without earlier turns (or with under ``PREFIX_MIN`` tokens of
them) is read afresh in slot 0 (``cache_prompt`` off). The host-memory prompt cache is off.
The K samples of a request still share one reading of the prompt. The chain is temperature then top-p (transformers'
order), with every other llama.cpp sampler off.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import random
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import xllamacpp as xlc
from filelock import FileLock, Timeout
from jinja2 import TemplateError

from blackbox_wd.clients.sampling import BatchSampler
from blackbox_wd.clients.seeds import sample_seed
from blackbox_wd.cpus import cpu_threads
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.records import JSONObject, Messages, Sample, SampleSet, SamplingParams

if TYPE_CHECKING:
    from blackbox_wd.teachers.teacher import Teacher

SLOTS = 24  # sequences decoded together: a prompt's K samples (a larger K goes in several requests)
CONTEXT = 8192  # KV cells shared by all sequences (a prompt's cells, shared by its K sequences, count once)
PREFIX_MIN = 32  # earlier turns shorter than this are read with each request: a restore would save too little
SAVED = 8  # saved readings of earlier turns each server keeps on disk, the least recently used deleted first
SLOT_DIRS = "bbwd-llamacpp-slots-"  # the prefix of each process's folder of saved slots, in the temp folder
STALE_S = 60.0  # a folder whose lock is free and this old is a killed process's leftover
SLOT = 0  # the slot every request runs in (its K samples take others, copied from it)
SEED_SPAN = 1 << 31  # llama.cpp seeds are uint32: base + i stays below 2**32 for any K < 2**31

# Every llama.cpp sampler but temperature and top-p switched off, so the law is transformers' one.
NEUTRAL = {
    "top_k": 0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "top_n_sigma": -1.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "dry_multiplier": 0.0,
    "xtc_probability": 0.0,
    "mirostat": 0,
    "dynatemp_range": 0.0,
    "samplers": ["temperature", "top_p"],
}


def prompt_seed(seed: int | None, messages: Messages) -> int:
    """The seed of a prompt's sample 0 (sample i draws with this + i); random when seed is None."""
    if seed is None:
        return random.SystemRandom().randrange(SEED_SPAN)
    return sample_seed(seed, messages, 0) % SEED_SPAN


@dataclass(frozen=True)
class Host:
    """A llama.cpp server in this process, the folder its slots are saved to, the lock a prompt's requests hold
    (a restore and the request that reads from it go together) and the saved files, least recently used first."""

    server: Any
    slot_dir: Path
    lock: threading.Lock
    owner: FileLock  # held while the process lives: its folder is not a leftover
    saved: OrderedDict[str, None] = field(default_factory=OrderedDict)


def llamacpp_params(gguf: Path, *, slots: int, context: int, threads: int, unified: bool = False) -> Any:
    """The parameters of llama.cpp's server (xllamacpp) on ``gguf`` at 127.0.0.1, port 0 (a free one), quiet and
    without warm-up.

    Parameters
    ----------
    gguf : Path
        The model file.
    slots : int
        Sequences decoded together.
    context : int
        KV cells: one cache shared by all sequences when ``unified``, else split evenly.
    threads : int
        CPU threads.
    unified : bool, default=False
        One KV cache for all sequences.

    Returns
    -------
    xllamacpp.CommonParams
        To change further (an alias, an API key, a port, a slot folder) before ``xllamacpp.Server(params)``.
    """
    p = xlc.CommonParams()
    p.model.path = str(gguf)
    p.n_parallel = slots
    p.n_ctx = context
    p.kv_unified = unified
    p.warmup = False
    p.verbosity = -1
    p.hostnames = ["127.0.0.1"]
    p.port = 0
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = threads
    return p


@functools.cache
def server_for(gguf: Path) -> Host:
    """llama.cpp's server in process on ``gguf``, with the folder its slots are saved to: ``SLOTS`` sequences, one
    unified KV cache of ``CONTEXT`` cells, quiet; started once per process and kept until it exits (the wheel's
    servers, started and dropped in turn in one process, can hang in their destructor or their first request).

    It listens on a free port of 127.0.0.1: samplers post to its native ``/completion``, the one answer that
    carries every generated token id (the OpenAI-style ones leave out tokens ending inside a UTF-8 character).
    """
    slot_dir, owner = new_slot_dir()
    params = llamacpp_params(gguf, slots=SLOTS, context=CONTEXT, threads=cpu_threads(), unified=True)
    params.slot_save_path = os.path.join(slot_dir, "")  # llama.cpp appends the file name to it as it is
    params.cache_ram_mib = 0  # no host-memory prompt cache: a slot holds only what its requests or a restore left
    params.cache_idle_slots = False
    server = xlc.Server(params)
    return Host(server, slot_dir, threading.Lock(), owner)


def new_slot_dir() -> tuple[Path, FileLock]:
    """A new folder in the temp folder for this process's saved slots, and the lock on its ``.lock`` file that
    the process holds until it exits (the folder is removed at exit). The leftovers of processes killed before
    their exit ran (kill -9) are removed first: folders whose lock nobody holds, locked over ``STALE_S`` ago."""
    for old in Path(tempfile.gettempdir()).glob(SLOT_DIRS + "*"):
        lock_file = old / ".lock"
        try:
            if time.time() - lock_file.stat().st_mtime < STALE_S:
                continue
            with FileLock(lock_file, timeout=0):
                shutil.rmtree(old, ignore_errors=True)
        except (OSError, Timeout):  # no lock file (not ours to judge), or a live process holds it
            continue
    slot_dir = Path(tempfile.mkdtemp(prefix=SLOT_DIRS))
    owner = FileLock(slot_dir / ".lock", timeout=0)
    owner.acquire()
    atexit.register(shutil.rmtree, slot_dir, True)
    return slot_dir, owner


class LlamaCppSampler(BatchSampler):
    """Samples the teacher's GGUF model with llama.cpp; the samples carry the teacher's token ids and log-probs."""

    name = "llama.cpp"

    def __init__(self, teacher: Teacher, gguf: str | Path, slots: int = SLOTS) -> None:
        self.teacher = teacher
        self.slots = min(slots, SLOTS)  # sequences a request
        self.host = server_for(Path(gguf).resolve())
        self.client = httpx.Client(base_url=self.host.server.listening_address, timeout=None)  # 127.0.0.1

    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt."""
        return self.sample_many([(messages, params.k)], params)[0]

    def sample_many(
        self, requests: Sequence[tuple[Messages, int]], params: SamplingParams, answers: bool = False
    ) -> list[SampleSet]:
        """``k`` samples for each (messages, k), and with ``answers`` each prompt's greedy answer (temperature 0).

        One request at a time: a prompt's samples are batched with each other only, its answer with nothing, so
        neither depends on what else is drawn (llama.cpp's kernels round by batch size).
        """
        prompts = [self.teacher.prompt_ids(m) for m, _ in requests]  # BBWDError for a prompt over the context
        for ids, (_, k) in zip(prompts, requests, strict=True):
            if len(ids) + k * params.max_tokens > CONTEXT:
                raise BBWDError(
                    f"a prompt of {len(ids)} tokens and {k} x {params.max_tokens} new ones is over "
                    f"llama.cpp's cache of {CONTEXT} tokens"
                )
        once = SamplingParams(1, 0.0, 1.0, params.max_tokens, 0)
        out = []
        for ids, (m, k) in zip(prompts, requests, strict=True):
            head = self.earlier_turns(m, ids)
            out.append(
                SampleSet(
                    self.complete(ids, k, params, prompt_seed(params.seed, m) + params.start, head),
                    answer=self.complete(ids, 1, once, 0, head)[0] if answers else None,
                )
            )
        return out

    def earlier_turns(self, messages: Messages, ids: list[int]) -> list[int]:
        """The token ids of the prompt's earlier turns (all its messages but the last, rendered as a finished
        conversation) when the prompt ``ids`` start with them and they are at least ``PREFIX_MIN`` tokens; else []."""
        if len(messages) < 2 or not self.teacher.tokenizer.chat_template:
            return []
        try:
            head = self.teacher.reader.chat_ids(messages[:-1], generation_prompt=False)
        except (TemplateError, BBWDError):  # e.g. a template that wants the turns to end with the user's
            return []
        return head if PREFIX_MIN <= len(head) < len(ids) and ids[: len(head)] == head else []

    def complete(
        self, prompt: list[int], k: int, params: SamplingParams, seed: int, head: Sequence[int] = ()
    ) -> list[Sample]:
        """``k`` completions of the prompt's token ids, sequence i drawn with seed ``seed + i`` (at most ``slots``
        sequences a request). With ``head`` (the prompt's earlier turns) each request starts from the saved
        reading of ``head`` in slot 0, else from an empty slot (module docstring)."""
        out: list[Sample] = []
        for start in range(0, k, self.slots):
            n = min(self.slots, k - start)
            body = {
                "prompt": prompt,
                "n_cmpl": n,
                "n_predict": params.max_tokens,
                "temperature": params.temperature,
                "top_p": params.top_p,
                "seed": seed + start,
                "n_probs": 1,
                "return_tokens": True,
                "id_slot": SLOT,
                "cache_prompt": bool(head),  # only the restored head is read from the cache
                **NEUTRAL,
            }
            with self.host.lock:
                if head:
                    self.restore(head)
                results = self.post("/completion", body)
            out += [
                self.as_sample(r)
                for r in sorted(results if isinstance(results, list) else [results], key=lambda r: r.get("index", 0))
            ]
        return out

    def restore(self, head: Sequence[int]) -> None:
        """Slot 0 holding exactly ``head`` read from an empty slot: read and saved once while among the ``SAVED``
        used last, then restored. The caller holds the host's lock."""
        name = hashlib.sha256(repr(list(head)).encode()).hexdigest()[:32] + ".bin"
        saved = self.host.saved
        if name in saved:
            saved.move_to_end(name)
        else:
            self.post(f"/slots/{SLOT}?action=erase", {})
            self.post("/completion", {"prompt": list(head), "n_predict": 0, "id_slot": SLOT, "cache_prompt": True})
            self.post(f"/slots/{SLOT}?action=save", {"filename": name})
            saved[name] = None
            while len(saved) > SAVED:
                (self.host.slot_dir / saved.popitem(last=False)[0]).unlink(missing_ok=True)
        self.post(f"/slots/{SLOT}?action=restore", {"filename": name})

    def post(self, path: str, body: JSONObject) -> Any:
        """The JSON answer of a POST to the server; BBWDError for any other status than 200."""
        reply = self.client.post(path, json=body)
        if reply.status_code != 200:
            raise BBWDError(f"llama.cpp: {one_line(reply.text)}")
        return reply.json()

    def as_sample(self, result: JSONObject) -> Sample:
        """One llama.cpp completion as a Sample: its token ids (the end-of-turn token dropped), the teacher
        tokenizer's text of them, and their log-probs when llama.cpp reported one for every token.

        llama.cpp leaves out the log-prob of a token that ends inside a UTF-8 character (a piece of an
        emoji or a CJK character); such a sample gets no ``token_logprobs`` (LNE then asks the teacher).
        """
        ids = tuple(int(t) for t in result["tokens"])
        stopped = result.get("stop_type") == "eos"
        if stopped:
            ids = ids[:-1]
        probs = result.get("completion_probabilities") or []
        complete = [int(p["id"]) for p in probs[: len(ids)]] == list(ids)
        return Sample(
            text=self.teacher.tokenizer.decode(ids, skip_special_tokens=True),
            token_ids=ids,
            token_logprobs=tuple(float(p["logprob"]) for p in probs[: len(ids)]) if complete else None,
            finish_reason="stop" if stopped else "length",
        )
