"""Target samplers: a local transformers model (white-box) or an OpenAI-compatible API; the one sampler of a run.

``sampling`` (the declared interfaces ``Sampler`` / ``AsyncSampler`` / ``BatchSampler`` and ``draw_group``, the one
place that picks how a group is drawn), ``local`` (white-box sampling with transformers, inverse-CDF draw),
``llamacpp`` (white-box sampling with llama.cpp on the teacher's own GGUF file, in process), ``api`` (black-box
sampling from an OpenAI-compatible API; ``APIOptions``: the key, record/replay, timeouts, retries and cache folder,
read once and passed as a value), ``cache`` (disk cache of API samples, never keyed on the API key), ``retry``
(which API failures are retried, for how long), ``replay`` (record and replay HTTP exchanges), ``presets`` (API
targets: named presets or any endpoint by URL) and ``seeds`` (each sample's seed, shared by the local samplers).
Here, a sampler's module is imported when that sampler is built: a local target imports no OpenAI client, and
llama.cpp no transformers sampling code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from blackbox_wd.clients.presets import PRESETS, api_endpoint
from blackbox_wd.clients.sampling import BatchSampler
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.files import gguf_of
from blackbox_wd.teachers.hf import Placement, ready_teacher
from blackbox_wd.teachers.registry import known_names, resolve

if TYPE_CHECKING:
    from blackbox_wd.clients.api import APIOptions, APISampler
    from blackbox_wd.teachers.forcing import HFTeacher
    from blackbox_wd.teachers.teacher import Teacher

__all__ = ["api_host", "api_sampler_for", "local_sampler_for", "local_sampler_name", "target_kind"]


def target_kind(settings: Settings) -> str:
    """'white-box', 'api' or 'local' for the settings' target; BBWDError for a target bbwd cannot reach.

    An API target is a preset or any model name with ``base_url``. A local target is a registry
    name, a model folder or a .gguf file; a bare hub id (org/name) is refused rather than
    downloaded, since it usually names a hosted model that needs ``--base-url``.
    """
    target = settings.target
    if settings.white_box or target is None:  # white_box holds for no target; the check tells type checkers
        return "white-box"
    if settings.base_url is not None or target in PRESETS:
        return "api"
    path = Path(target).expanduser()
    if (
        target in known_names()
        or (target.endswith(".gguf") and path.is_file())
        or (path.is_dir() and (path / "config.json").exists())
    ):
        return "local"
    raise BBWDError(
        f"unknown target '{target}': API presets are {', '.join(PRESETS)}; any other model behind an "
        "OpenAI-compatible endpoint needs --base-url URL (and --api-key-env VAR); local targets are "
        f"{', '.join(known_names())}, a model folder or a .gguf file"
    )


def api_sampler_for(settings: Settings, options: APIOptions | None = None) -> APISampler | None:
    """The API sampler when the settings' target is reached through an API, else None.

    Parameters
    ----------
    settings : Settings
        The run's settings.
    options : APIOptions or None
        The API key (a value), record/replay, timeout, retries, cache folder and shared slot, as read elsewhere
        (a Ray driver's, for its actors); None: read from this process's environment (``api.api_options``).

    Returns
    -------
    APISampler or None
    """
    if target_kind(settings) != "api":
        return None
    from blackbox_wd.clients.api import make_api_sampler  # openai and tenacity: only for an API target

    return make_api_sampler(settings, options=options)


def api_host(settings: Settings) -> str | None:
    """The host of the settings' API endpoint (a reported setting); None for a local target."""
    if target_kind(settings) != "api":
        return None
    return api_endpoint(settings).host


def local_model(settings: Settings) -> str | None:
    """The local model a target is drawn from: the teacher (white-box), the target, or None for an API target."""
    kind = target_kind(settings)
    return None if kind == "api" else settings.teacher if kind == "white-box" else settings.target


def local_sampler_name(settings: Settings, device: str) -> str | None:
    """What draws the settings' target on ``device``: "llama.cpp" for a model whose weights are a GGUF file
    (bundled or a path) run on CPU, else "transformers"; None for an API target."""
    model = local_model(settings)
    return None if model is None else drawn_by(model, device)


def drawn_by(model: str, device: str) -> str:
    """What samples a local model on ``device``: "llama.cpp" for GGUF weights on CPU, else "transformers"."""
    return "llama.cpp" if device == "cpu" and resolve(model).kind in ("embedded", "gguf") else "transformers"


def local_sampler_for(settings: Settings, teacher: Teacher, place: Placement | None = None) -> BatchSampler:
    """The sampler of a local target (``local_sampler_name``): of the teacher itself (white-box) or of another model.

    Parameters
    ----------
    settings : Settings
    teacher : Teacher
        The run's teacher, ready.
    place : Placement or None
        The teacher's device and dtype (``hf.placement``), in which another model as the target is loaded; None
        where the target is the teacher.

    Returns
    -------
    BatchSampler
    """
    name = local_model(settings)
    if name is None:
        raise BBWDError(f"target '{settings.target}' is an API model: it has no local sampler")
    if settings.white_box:
        model = teacher
    elif place is None:
        raise BBWDError(f"target '{name}' is another local model: its sampler needs the teacher's placement")
    else:
        model = ready_teacher(name, place)
    if drawn_by(name, str(model.device)) == "transformers":
        from blackbox_wd.clients.local import LocalSampler  # transformers' generate: only where it draws

        return LocalSampler(cast("HFTeacher", model))  # off CPU, or not bundled: forced in torch (``hf.placement``)
    from blackbox_wd.clients.llamacpp import LlamaCppSampler  # xllamacpp: only where llama.cpp draws

    return LlamaCppSampler(model, gguf_of(resolve(name)))
