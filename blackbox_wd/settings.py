"""Settings of a run, checked when made, and the one fingerprint of what changes a prompt's score."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, TypeGuard, get_args
from urllib.parse import urlsplit, urlunsplit

from blackbox_wd.adaptive import RULE
from blackbox_wd.adaptive import rounds as adaptive_rounds
from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.wd import DEFAULT_ALPHA, P_NORM
from blackbox_wd.records import JSONView, SamplingParams
from blackbox_wd.teachers.registry import EMBEDDED, default_norm

Dtype = Literal["auto", "float32", "bfloat16", "float16"]
# the teacher's own norm, token states as the layer gives them, or each of unit length
Norm = Literal["auto", "none", "unit"]
Stop = Literal["settle"]  # ``-k auto``'s rule (``adaptive.RULE``)
ClaimsFrom = Literal["target"]  # who lists a judged answer's claims (``CLAIMS_FROM_TARGET``)
DTYPES: tuple[Dtype, ...] = get_args(Dtype)
NORMS: tuple[Norm, ...] = get_args(Norm)
RECORDED = "recorded"  # the reported target of samples that came with the data
# ``Settings.claims``: the target lists each judged answer's claims (``decompose``)
CLAIMS_FROM_TARGET: ClaimsFrom = "target"
GROUP_SIZE = 8  # records drawn together and teacher-forced in one shared-prefix pass (batch, eval, Ray)

# What changes the score of a given prompt; ``fingerprint`` hashes exactly these (as run: the
# resolved layer, the API endpoint's host, the local sampler) plus the prompt protocol where one applies.
SCORE_FIELDS = (
    "teacher",
    "target",
    "sampler",
    "endpoint",
    "layer",
    "k",
    "stop",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "alpha",
    "p",
    "proj_dim",
    "proj_seed",
    "norm",
    "protocol",
)
# Score fields added after the first fingerprints were stored, with the value that gives the behaviour from before
# them: a field at that value is left out of the hash, so that stored fingerprints (calibrations, resumed runs) hold.
LATER_FIELDS = {"norm": "none", "stop": None}


@dataclass(frozen=True)
class Settings:
    """Everything that determines a score, and how to reach the models; checked on creation.

    Frozen: derive a variant with ``dataclasses.replace``. The fields that change a prompt's score are
    hashed by :func:`fingerprint` (``SCORE_FIELDS``, as run: see :class:`ReportedSettings`).

    Parameters
    ----------
    teacher : str, default="smollm2-135m"
        The teacher: a registry name, a hub id, a model folder or a ``.gguf`` file.
    target : str or None, default=None
        The model whose answers are checked: an API preset, a served model name with ``base_url``, or a
        local model; None (or the teacher's own name without ``base_url``): white-box, the teacher samples.
    k : int, default=10
        Responses sampled per prompt, >= 2; with ``stop``, the most a prompt may draw (``--k-max``).
    stop : str or None, default=None
        "settle" (``-k auto``): draw in rounds of 3, 5, 10, ... samples up to ``k`` and stop once the verdict is
        settled (``adaptive``; it needs a calibration fitted with rounds); None: always K.
    temperature : float, default=0.5
        Sampling temperature, finite and >= 0.
    top_p : float, default=1.0
        Nucleus sampling mass, in (0, 1].
    max_tokens : int, default=128
        New tokens per response, >= 1.
    seed : int or None, default=0
        Sampling seed, >= 0; None: unseeded.
    layer : int or None, default=None
        The teacher layer whose states are read, >= 1; None: floor(L / 2) of an L-layer teacher.
    alpha : float, default=1e-3
        EigenWD's diagonal shift (``wd.DEFAULT_ALPHA``), finite and >= 0.
    p : float, default=0.1
        EigenWD's norm order (``wd.P_NORM``), finite and > 0.
    norm : str, default="auto"
        The token states' scale before transport: "unit" (each token's state scaled to length 1,
        ``wd.unit_states``: no token's massive activation dominates the cost), "none" (as the layer
        gives them, the paper's) or "auto": the teacher's own (``teachers.registry.default_norm``: "none" for
        SmolLM2, measured better so, "unit" for every other). Results report and fingerprint the resolved one.
    device : str, default="auto"
        "auto", "cpu", "cuda" or "cuda:N".
    dtype : str, default="auto"
        The teacher's dtype: "auto" (bfloat16 on GPU, float32 on CPU), "float32", "bfloat16" or "float16".
    base_url : str or None, default=None
        An OpenAI-compatible endpoint of the target.
    api_key_env : str or None, default=None
        The environment variable holding the endpoint's API key (None: the preset's).
    cache : bool, default=True
        Read and write the API response cache (and, in eval, the teacher-state cache).
    cache_dir : str or None, default=None
        The API response cache's folder; None: the default under the cache directory.
    concurrency : int, default=16
        API requests in flight at most, shared by all prompts, >= 1.
    token_budget : int, default=16384
        Padded tokens in one teacher forward pass at most, >= 1.
    retry_budget : float, default=300.0
        Seconds an API request may spend retrying transient failures, finite and >= 0.
    base_rate : float or None, default=None
        The share of hallucinated answers where the run scores, in (0, 1): each calibrated p is moved to it from
        the base rate of the calibration's data by Bayes' rule (``calibration.heads.shift_prior``); the flag
        keeps the calibration's false-positive rate. None: p at the calibration's own base rate. Not a score
        setting: it changes how p reads, not the scores.
    claims : str or None, default=None
        "target": the target lists each judged answer's atomic claims (``decompose``: one request per answer,
        through the run's sampler, cached and replayed like every request), and each claim is scored; None: the
        claims given are scored (a record's ``claims``, ``--claim``, serve's ``bbwd.claims``). Not a score setting.

    Raises
    ------
    BBWDError
        On creation, naming the first field out of its range (``check_settings``).
    """

    teacher: str = EMBEDDED
    target: str | None = None  # None: white-box, sample from the teacher itself
    k: int = 10
    stop: Stop | None = None  # "settle": -k auto, up to k samples
    temperature: float = 0.5
    top_p: float = 1.0
    max_tokens: int = 128
    seed: int | None = 0
    layer: int | None = None  # None: floor(L / 2)
    alpha: float = DEFAULT_ALPHA
    p: float = P_NORM
    norm: Norm = "auto"
    device: str = "auto"
    dtype: Dtype = "auto"
    base_url: str | None = None
    api_key_env: str | None = None
    cache: bool = True
    cache_dir: str | None = None
    concurrency: int = 16
    token_budget: int = 16384
    retry_budget: float = 300.0  # seconds an API request may spend retrying transient failures
    base_rate: float | None = None  # the user's share of hallucinations, for p (not a score setting)
    claims: ClaimsFrom | None = None  # "target": the target lists each judged answer's claims (not a score setting)

    def __post_init__(self) -> None:
        check_settings(self)

    @property
    def resolved_norm(self) -> str:
        """The norm the transport uses: ``norm``, or for "auto" the teacher's own."""
        return default_norm(self.teacher) if self.norm == "auto" else self.norm

    @property
    def white_box(self) -> bool:
        """True when the target is the teacher itself."""
        return self.target is None or (self.target == self.teacher and self.base_url is None)

    def sampling(self) -> SamplingParams:
        """The sampling part of the settings (K: the most a prompt draws)."""
        return SamplingParams(self.k, self.temperature, self.top_p, self.max_tokens, self.seed)

    @property
    def rounds(self) -> tuple[int, ...]:
        """The sample counts at which a prompt's verdict is looked at: ``adaptive.rounds(k)`` with ``stop``, else
        (k,)."""
        return adaptive_rounds(self.k) if self.stop is not None else (self.k,)


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
    ``fingerprint`` of the run last. A run on recorded samples reports ``target`` "recorded", no sampler, no
    sampling settings and ``samples_from``, who drew them as the user said it (None: not said); ``samples_from``
    is not a score field (the fingerprint leaves it out).
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
    samples_from: str | None = None  # with recorded: who drew the samples, as the user says it

    @classmethod
    def of(
        cls,
        settings: Settings,
        teacher: TeacherShape,
        endpoint: str | None,
        device: str,
        recorded: bool = False,
        sampler: str | None = None,
        samples_from: str | None = None,
    ) -> ReportedSettings:
        """The reported settings of a run with this teacher (or its card), API endpoint host and local sampler
        (``recorded``: samples that came with the data, drawn by ``samples_from``)."""
        return cls(
            settings,
            endpoint,
            teacher.layer,
            teacher.n_layers,
            teacher.proj_dim,
            teacher.proj_seed,
            device,
            recorded,
            sampler,
            samples_from,
        )

    def as_dict(self) -> dict[str, Any]:
        """The JSON object results carry: every setting, as run, then the fingerprint."""
        s = self.settings
        out = asdict(s)
        out.update(
            norm=s.resolved_norm,
            target=s.target or s.teacher,
            white_box=s.white_box,
            endpoint=self.endpoint,
            layer=self.layer,
            n_layers=self.n_layers,
            proj_dim=self.proj_dim,
            proj_seed=self.proj_seed,
            device=self.device,
            sampler=self.sampler,
        )
        if self.recorded:
            out.update(
                target=RECORDED,
                white_box=False,
                sampler=None,
                samples_from=self.samples_from,
                temperature=None,
                top_p=None,
                max_tokens=None,
                seed=None,
            )
        out["base_url"] = without_userinfo(s.base_url)
        out["fingerprint"] = fingerprint(out)
        return out

    @property
    def fingerprint(self) -> str:
        """The fingerprint of the settings that change a prompt's score (:func:`fingerprint`)."""
        return self.as_dict()["fingerprint"]


def without_userinfo(url: str | None) -> str | None:
    """The URL without a user name or password in it: the settings a result carries never hold a secret.

    >>> without_userinfo("https://user:sk-secret@api.example.com:8443/v1"), without_userinfo(None)
    ('https://api.example.com:8443/v1', None)
    """
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname or ""
    return urlunsplit(parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")))


def _finite(value: Any) -> bool:
    """A real number that is not NaN or infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: object) -> TypeGuard[int]:
    """An int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_k(k: object) -> None:
    """Raise BBWDError unless K is an integer >= 2: a distance needs two responses."""
    if not _whole(k) or k < 2:
        raise BBWDError(f"k must be at least 2 (got {k}): a distance needs two responses")


def check_group_size(group_size: object) -> None:
    """Raise BBWDError unless the group size is an integer >= 1."""
    if not _whole(group_size) or group_size < 1:
        raise BBWDError(f"group_size must be an integer >= 1 (got {group_size})")


def check_settings(s: Settings) -> None:
    """Raise BBWDError naming the first setting out of its range."""
    check_k(s.k)
    rules = [
        ("stop", s.stop in (None, RULE), f"None or {RULE!r}"),
        ("temperature", _finite(s.temperature) and s.temperature >= 0, "a number >= 0"),
        ("top_p", _finite(s.top_p) and 0 < s.top_p <= 1, "in (0, 1]"),
        ("max_tokens", _whole(s.max_tokens) and s.max_tokens >= 1, "an integer >= 1"),
        ("seed", s.seed is None or (_whole(s.seed) and s.seed >= 0), "an integer >= 0"),
        ("layer", s.layer is None or (_whole(s.layer) and s.layer >= 1), "an integer >= 1"),
        ("alpha", _finite(s.alpha) and s.alpha >= 0, "a number >= 0"),
        ("p", _finite(s.p) and s.p > 0, "a number > 0"),
        ("norm", s.norm in NORMS, f"one of {', '.join(NORMS)}"),
        ("dtype", s.dtype in DTYPES, f"one of {', '.join(DTYPES)}"),
        ("concurrency", _whole(s.concurrency) and s.concurrency >= 1, "an integer >= 1"),
        ("token_budget", _whole(s.token_budget) and s.token_budget >= 1, "an integer >= 1"),
        ("retry_budget", _finite(s.retry_budget) and s.retry_budget >= 0, "a number of seconds >= 0"),
        ("base_rate", s.base_rate is None or (_finite(s.base_rate) and 0 < s.base_rate < 1), "a number in (0, 1)"),
        ("claims", s.claims in (None, CLAIMS_FROM_TARGET), f"None or {CLAIMS_FROM_TARGET!r}"),
    ]
    for name, ok, want in rules:
        if not ok:
            raise BBWDError(f"{name} must be {want} (got {getattr(s, name)})")


def fingerprint(reported: JSONView, *, seed: bool = True) -> str:
    """16 hex digits of sha256 over the SCORE_FIELDS of a run's reported settings.

    Batch and eval resume, calibration files and served responses all compare this value; a
    calibration passes ``seed=False``: the seed changes which samples are drawn, not their law.
    """
    fields = {
        name: reported.get(name)
        for name in SCORE_FIELDS
        if (seed or name != "seed") and not (name in LATER_FIELDS and reported.get(name) in (None, LATER_FIELDS[name]))
    }
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


# The readable settings a calibration covers: what changes a score, less the seed and the prompt
# protocol (the protocol says where it was fitted, ``FittedOn.protocol``; a scored prompt has none).
COVERED = tuple(name for name in SCORE_FIELDS if name not in ("seed", "protocol"))
# Of those, what a score means: a calibration fitted under other values of these is refused ...
MEANING = ("teacher", "layer", "k", "stop", "alpha", "p", "proj_dim", "proj_seed", "norm")
# ... less these, which a calibration serves with heads per sample count (``calibration.model.Calibration.fitted_k``)
PER_K = ("k", "stop")
# ... and the sampling side: a calibration fitted under other values of these applies, with a note.
SAMPLING = ("target", "sampler", "endpoint", "temperature", "top_p", "max_tokens")
assert sorted(MEANING + SAMPLING) == sorted(COVERED)
# Of the meaning settings, those of the teacher's states: a calibration whose heads read none (``teacher_free``)
# serves a run under any values of them.
TEACHER_SIDE = tuple(name for name in MEANING if name not in PER_K)


def covered_settings(reported: JSONView) -> dict[str, Any]:
    """The settings of a run (``Detector.reported_settings()``) that a calibration must match; a setting added
    later (``settings.LATER_FIELDS``) that they lack has the value that gives the behaviour from before it."""
    out = {name: reported.get(name) for name in COVERED}
    for name, before in LATER_FIELDS.items():
        if out.get(name, before) is None:
            out[name] = before
    return out


def calibration_fingerprint(reported: JSONView) -> str:
    """``fingerprint(reported, seed=False)`` over the covered settings (no prompt protocol)."""
    return fingerprint(covered_settings(reported), seed=False)
