"""Target samplers: a local transformers model (white-box) or an OpenAI-compatible API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from blackbox_wd.clients.local import LocalSampler

if TYPE_CHECKING:
    from blackbox_wd.clients.api import APISampler
    from blackbox_wd.pipeline import Settings
    from blackbox_wd.teachers.hf import HFTeacher

__all__ = ["LocalSampler", "api_sampler_for", "local_sampler_for"]


def api_sampler_for(settings: Settings) -> APISampler | None:
    """The API sampler when the settings' target is reached through an API, else None."""
    if settings.white_box:
        return None
    from blackbox_wd.clients.api import is_api_target, make_api_sampler

    return make_api_sampler(settings) if is_api_target(settings.target, settings.base_url) else None


def local_sampler_for(settings: Settings, teacher: HFTeacher) -> LocalSampler:
    """Sample from the teacher itself (white-box) or from another local model."""
    from blackbox_wd.teachers.hf import load_teacher

    if settings.white_box:
        return LocalSampler(teacher)
    return LocalSampler(load_teacher(settings.target, settings.device, settings.dtype))
