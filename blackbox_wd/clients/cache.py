"""Disk cache of API samples, one entry per (request, sample index); never keyed on the API key."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import diskcache

from blackbox_wd.paths import cache_dir
from blackbox_wd.records import Messages, SamplingParams


@dataclass(frozen=True)
class CachedSample:
    """What is kept of one sampled choice."""

    text: str
    token_logprobs: tuple[float, ...] | None
    finish_reason: str | None
    completion_tokens: int


def sample_key(host: str, model: str, messages: Messages, params: SamplingParams, index: int) -> str:
    """sha256 of (endpoint host, model, messages, temperature, top_p, max_tokens, seed, sample index)."""
    payload = json.dumps(
        [host, model, messages, params.temperature, params.top_p, params.max_tokens, params.seed, index],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def default_cache_dir() -> Path:
    """``<bbwd cache>/api``."""
    return cache_dir() / "api"


class SampleCache:
    """diskcache-backed store of :class:`CachedSample` by :func:`sample_key`."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory else default_cache_dir()
        self._cache = diskcache.Cache(str(self.directory))

    def get(self, key: str) -> CachedSample | None:
        """The cached sample for a key, or None."""
        raw = self._cache.get(key)
        if raw is None:
            return None
        data = json.loads(raw)
        lp = data.get("token_logprobs")
        return CachedSample(
            data["text"],
            tuple(lp) if lp is not None else None,
            data.get("finish_reason"),
            int(data.get("completion_tokens", 0)),
        )

    def put(self, key: str, sample: CachedSample) -> None:
        """Store a sample (JSON text, so the cache holds no pickles)."""
        self._cache.set(key, json.dumps(asdict(sample)))

    def __len__(self) -> int:
        return len(self._cache)

    def keys(self) -> list[str]:
        """All keys (for tests and inspection)."""
        return list(self._cache.iterkeys())

    def close(self) -> None:
        """Close the underlying SQLite handle."""
        self._cache.close()
