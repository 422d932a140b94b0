"""What ``Detector.from_settings`` builds from the settings: the teacher (its weights, or its card) on its device,
the target's sampler, and the settings as run (:func:`run_report`, which every result carries).
"""

from __future__ import annotations

from typing import cast

from blackbox_wd.clients import api_host, local_sampler_for, local_sampler_name, target_kind
from blackbox_wd.sampling import RecordedSamples, Sampler, endpoint_host, sampler_name
from blackbox_wd.settings import ReportedSettings, Settings, TeacherShape
from blackbox_wd.teachers.card import TeacherCard, load_card
from blackbox_wd.teachers.hf import HFTeacher, load_teacher, resolve_device


def build_teacher(settings: Settings, weights: bool, cuda: bool | None) -> tuple[HFTeacher | TeacherCard, str]:
    """The teacher the settings name, and the device it runs on.

    Parameters
    ----------
    settings : Settings
        Its name, device, dtype, layer and token budget.
    weights : bool
        Load its weights; False: its card only (a driver that scores states forced elsewhere).
    cuda : bool or None
        Without weights: whether a GPU is there for ``device="auto"``; None: this process's torch says.

    Returns
    -------
    tuple of (HFTeacher or TeacherCard, str)
    """
    if weights:
        teacher = load_teacher(settings.teacher, settings.device, settings.dtype, settings.layer, settings.token_budget)
        return teacher, str(teacher.device)
    return load_card(settings.teacher, settings.layer), resolve_device(settings.device, cuda)


def build_sampler(
    settings: Settings,
    teacher: HFTeacher | TeacherCard | None,
    api: Sampler | None,
    recorded: bool,
    samples_from: str | None,
) -> Sampler | None:
    """The target's sampler: recorded samples' (``recorded``, drawn by ``samples_from``), the API's (``api``: built
    first by ``clients.api_sampler_for``, so that a missing key fails before any model loads), a local one on the
    teacher's weights (``teacher`` an HFTeacher), or None where this process draws nothing."""
    if recorded:
        return RecordedSamples(samples_from)
    if api is not None:
        return api
    if isinstance(teacher, HFTeacher) and target_kind(settings) != "api":
        return local_sampler_for(settings, teacher)
    return None


def run_report(
    settings: Settings, teacher: HFTeacher | TeacherCard, sampler: Sampler | None, device: str
) -> ReportedSettings:
    """The settings as run: the resolved layer and projection, the device, the API endpoint's host and the local
    sampler (from the sampler, or from the settings where this process has none), what recorded samples say.

    Parameters
    ----------
    settings : Settings
    teacher : HFTeacher or TeacherCard
    sampler : Sampler or None
    device : str
        The device the teacher runs on.

    Returns
    -------
    ReportedSettings
    """
    origin = sampler.origin if isinstance(sampler, RecordedSamples) else None
    if sampler is not None:
        endpoint, drawn = endpoint_host(sampler), sampler_name(sampler)
    else:
        endpoint, drawn = api_host(settings), local_sampler_name(settings, device.split(":")[0])
    shape = cast(TeacherShape, teacher)  # a card's shape is read-only; ReportedSettings.of only reads it
    recorded = isinstance(sampler, RecordedSamples)
    return ReportedSettings.of(settings, shape, endpoint, device, recorded=recorded, sampler=drawn, samples_from=origin)
