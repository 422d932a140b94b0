"""Settings of a run, checked when made, and the one fingerprint of what changes a prompt's score."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from blackbox_wd.errors import BBWDError
from blackbox_wd.records import SamplingParams
from blackbox_wd.scores import DEFAULT_ALPHA, P_NORM
from blackbox_wd.teachers.registry import EMBEDDED

DTYPES = ("auto", "float32", "bfloat16", "float16")
RECORDED = "recorded"  # the reported target of samples that came with the data

# What changes the score of a given prompt; ``fingerprint`` hashes exactly these (as run: the
# resolved layer, the API endpoint's host, the local sampler) plus the prompt protocol where one applies.
SCORE_FIELDS = ("teacher", "target", "sampler", "endpoint", "layer", "k", "temperature", "top_p", "max_tokens", "seed",
                "alpha", "p", "proj_dim", "proj_seed", "protocol")


@dataclass(frozen=True)
class Settings:
    """Everything that determines a score, and how to reach the models; checked on creation."""

    teacher: str = EMBEDDED
    target: str | None = None  # None: white-box, sample from the teacher itself
    k: int = 10
    temperature: float = 0.5
    top_p: float = 1.0
    max_tokens: int = 128
    seed: int | None = 0
    layer: int | None = None  # None: floor(L / 2)
    alpha: float = DEFAULT_ALPHA
    p: float = P_NORM
    device: str = "auto"
    dtype: str = "auto"
    base_url: str | None = None
    api_key_env: str | None = None
    cache: bool = True
    cache_dir: str | None = None
    concurrency: int = 16
    token_budget: int = 16384
    retry_budget: float = 300.0  # seconds an API request may spend retrying transient failures

    def __post_init__(self) -> None:
        check_settings(self)

    @property
    def white_box(self) -> bool:
        """True when the target is the teacher itself."""
        return self.target is None or (self.target == self.teacher and self.base_url is None)

    def sampling(self) -> SamplingParams:
        """The sampling part of the settings."""
        return SamplingParams(self.k, self.temperature, self.top_p, self.max_tokens, self.seed)


class TeacherShape(Protocol):
    """What the reported settings take from a teacher: its resolved layer and projection."""

    layer: int
    n_layers: int
    proj_dim: int
    proj_seed: int


@dataclass(frozen=True)
class ReportedSettings:
    """The settings as run: the resolved layer and projection, the API endpoint's host, the device, and
    the sampler that draws a local target ("llama.cpp" or "transformers"; None for an API or recorded samples).

    ``as_dict()`` is the ``settings`` object of every result (its keys in this order) with the
    ``fingerprint`` of the run last.
    """

    settings: Settings
    endpoint: str | None
    layer: int
    n_layers: int
    proj_dim: int
    proj_seed: int
    device: str
    recorded: bool = False  # the samples come recorded with the data: no target, no sampling settings
    sampler: str | None = None

    @classmethod
    def of(cls, settings: Settings, teacher: TeacherShape, endpoint: str | None, device: str,
           recorded: bool = False, sampler: str | None = None) -> "ReportedSettings":
        """The reported settings of a run with this teacher (or its card), API endpoint host and local sampler."""
        return cls(settings, endpoint, teacher.layer, teacher.n_layers, teacher.proj_dim, teacher.proj_seed, device,
                   recorded, sampler)

    def as_dict(self) -> dict[str, Any]:
        """The JSON object results carry: every setting, as run, then the fingerprint."""
        s = self.settings
        out = asdict(s)
        out.update(target=s.target or s.teacher, white_box=s.white_box, endpoint=self.endpoint, layer=self.layer,
                   n_layers=self.n_layers, proj_dim=self.proj_dim, proj_seed=self.proj_seed, device=self.device,
                   sampler=self.sampler)
        if self.recorded:
            out.update(target=RECORDED, white_box=False, sampler=None, temperature=None, top_p=None, max_tokens=None,
                       seed=None)
        out["fingerprint"] = fingerprint(out)
        return out

    @property
    def fingerprint(self) -> str:
        """The fingerprint of the settings that change a prompt's score (:func:`fingerprint`)."""
        return self.as_dict()["fingerprint"]


def _finite(value: Any) -> bool:
    """A real number that is not NaN or infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: Any) -> bool:
    """An int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_k(k: Any) -> None:
    """Raise BBWDError unless K is an integer >= 2: a distance needs two responses."""
    if not _whole(k) or k < 2:
        raise BBWDError(f"k must be at least 2 (got {k}): a distance needs two responses")


def check_settings(s: Settings) -> None:
    """Raise BBWDError naming the first setting out of its range."""
    check_k(s.k)
    rules = [
        ("temperature", _finite(s.temperature) and s.temperature >= 0, "a number >= 0"),
        ("top_p", _finite(s.top_p) and 0 < s.top_p <= 1, "in (0, 1]"),
        ("max_tokens", _whole(s.max_tokens) and s.max_tokens >= 1, "an integer >= 1"),
        ("seed", s.seed is None or (_whole(s.seed) and s.seed >= 0), "an integer >= 0"),
        ("layer", s.layer is None or (_whole(s.layer) and s.layer >= 1), "an integer >= 1"),
        ("alpha", _finite(s.alpha) and s.alpha >= 0, "a number >= 0"),
        ("p", _finite(s.p) and s.p > 0, "a number > 0"),
        ("dtype", s.dtype in DTYPES, f"one of {', '.join(DTYPES)}"),
        ("concurrency", _whole(s.concurrency) and s.concurrency >= 1, "an integer >= 1"),
        ("token_budget", _whole(s.token_budget) and s.token_budget >= 1, "an integer >= 1"),
        ("retry_budget", _finite(s.retry_budget) and s.retry_budget >= 0, "a number of seconds >= 0"),
    ]
    for name, ok, want in rules:
        if not ok:
            raise BBWDError(f"{name} must be {want} (got {getattr(s, name)})")


def fingerprint(reported: Mapping[str, Any], *, seed: bool = True) -> str:
    """16 hex digits of sha256 over the SCORE_FIELDS of a run's reported settings.

    Batch and eval resume, calibration files and served responses all compare this value; a
    calibration passes ``seed=False``: the seed changes which samples are drawn, not their law.
    """
    fields = {name: reported.get(name) for name in SCORE_FIELDS if seed or name != "seed"}
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
