"""Disk cache of teacher-forced token states, so that a rerun with another K, alpha or p forces nothing twice.

An entry is one response forced after one prompt, keyed by sha256 of the teacher's identity (its name,
where its weights were loaded from with their files' sizes and modification times or the hub commit,
layer, projection, dtype, device type, torch and transformers versions) and the token ids of both.
Values are ``.npz`` bytes read with ``allow_pickle=False``: the cache holds no pickles. States read
back are the ones an earlier pass computed; a pass with other prompts beside them (another batch
shape) may differ from them in the last bits of float32 arithmetic, never more.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import diskcache
import numpy as np
import torch
import transformers

from blackbox_wd.paths import cache_dir
from blackbox_wd.records import TokenStates

if TYPE_CHECKING:
    from blackbox_wd.teachers.forcing import HFTeacher

SIZE_LIMIT = 8 * 2**30  # bytes; least recently stored entries go first beyond it


def default_states_dir() -> Path:
    """``<bbwd cache>/states``."""
    return cache_dir() / "states"


def weights_stamp(path: str) -> list[Any]:
    """(name, size, mtime_ns) of a local weights file or of every file in a weights folder; [] for a hub id."""
    p = Path(path)
    files = sorted(f for f in p.iterdir() if f.is_file()) if p.is_dir() else [p] if p.is_file() else []
    return [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files]


def teacher_identity(teacher: HFTeacher) -> str:
    """sha256 of everything about a teacher that changes its states (see the module docstring)."""
    config = teacher.model.config
    source = str(getattr(config, "_name_or_path", ""))
    stamp = weights_stamp(source) if source else [id(teacher.model)]  # a model built in memory: this process only
    payload = [
        teacher.name,
        source,
        getattr(config, "_commit_hash", None),
        stamp,
        teacher.layer,
        teacher.proj_dim,
        teacher.proj_seed,
        str(teacher.model.dtype),
        teacher.device.type,
        torch.__version__,
        transformers.__version__,
    ]
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()


class StateStore(Protocol):
    """Where forced states are kept by (prompt ids, response ids): a :class:`StateCache`, or the states of earlier
    rounds in memory (``rounds.KeptStates``)."""

    def get(self, prompt: Sequence[int], response: Sequence[int], logprobs: bool) -> TokenStates | None: ...

    def put(self, prompt: Sequence[int], response: Sequence[int], states: TokenStates, /) -> None: ...


class StateCache:
    """diskcache-backed store of one teacher's :class:`TokenStates` by (prompt ids, response ids)."""

    def __init__(self, teacher: Any, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory else default_states_dir()
        self.identity = teacher_identity(teacher)
        self._cache = diskcache.Cache(str(self.directory), size_limit=SIZE_LIMIT)

    def key(self, prompt: Sequence[int], response: Sequence[int]) -> str:
        """sha256 of the teacher's identity and the token ids of the pair."""
        payload = json.dumps([self.identity, list(prompt), list(response)], separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    def get(self, prompt: Sequence[int], response: Sequence[int], logprobs: bool) -> TokenStates | None:
        """The stored states of a pair, as a pass asking (or not) for ``logprobs`` returns them; None when not stored
        (or when log-probs are asked and were not stored)."""
        raw = self._cache.get(self.key(prompt, response))
        if raw is None:
            return None
        with np.load(io.BytesIO(raw), allow_pickle=False) as f:
            if logprobs and "logprobs" not in f:
                return None
            return TokenStates(f["states"], f["last"], f["logprobs"] if logprobs else None)

    def put(self, prompt: Sequence[int], response: Sequence[int], ts: TokenStates) -> None:
        """Store the states of a pair (with its log-probs when it has them)."""
        buf = io.BytesIO()
        if ts.logprobs is None:
            np.savez(buf, states=ts.states, last=ts.last)
        else:
            np.savez(buf, states=ts.states, last=ts.last, logprobs=ts.logprobs)
        self._cache.set(self.key(prompt, response), buf.getvalue())

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        """Close the underlying SQLite handle."""
        self._cache.close()
