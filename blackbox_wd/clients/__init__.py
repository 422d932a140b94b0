"""Target samplers: a local transformers model (white-box) or an OpenAI-compatible API."""

from blackbox_wd.clients.local import LocalSampler

__all__ = ["LocalSampler"]


def make_sampler(settings, teacher):  # noqa: ANN001 - typed in pipeline.Settings / HFTeacher
    """The sampler for the settings' target: the teacher itself, another local model, or an API."""
    from blackbox_wd.teachers.hf import load_teacher

    if settings.white_box:
        return LocalSampler(teacher)
    from blackbox_wd.clients.api import is_api_target, make_api_sampler

    if is_api_target(settings.target, settings.base_url):
        return make_api_sampler(settings)
    return LocalSampler(load_teacher(settings.target, settings.device, settings.dtype))
