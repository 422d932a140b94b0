"""What ``Detector.from_settings`` builds from the settings (:func:`build_parts`): the teacher (its weights, or its
card) on its device, the target's sampler, and the settings as run (:func:`settings_as_run`, which every result
carries).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, cast

from blackbox_wd.clients import api_host, api_sampler_for, local_sampler_for, local_sampler_name, target_kind
from blackbox_wd.clients.sampling import RecordedSamples, Sampler, endpoint_host, sampler_name
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import ReportedSettings, Settings, TeacherShape
from blackbox_wd.teachers.card import TeacherCard
from blackbox_wd.teachers.hf import Placement, ready_teacher
from blackbox_wd.teachers.teacher import Teacher

if TYPE_CHECKING:
    from blackbox_wd.clients.api import APIOptions


class TeacherLoader:
    """A teacher's weights, loaded when a prompt first needs them (``hf.ready_teacher``), then kept.

    Parameters
    ----------
    settings : Settings
        The teacher's name, layer and token budget.
    place : Placement
        Where its weights run.
    """

    def __init__(self, settings: Settings, place: Placement) -> None:
        self.settings, self.place = settings, place
        self.loaded: Teacher | None = None
        self._lock = threading.Lock()

    def teacher(self) -> Teacher:
        """The teacher, loaded on the first call (BBWDError where its weights cannot be read)."""
        with self._lock:
            if self.loaded is None:
                s = self.settings
                self.loaded = ready_teacher(s.teacher, self.place, s.layer, s.token_budget)
            return self.loaded


def build_parts(
    settings: Settings,
    *,
    recorded: bool,
    samples_from: str | None,
    weights: bool,
    sample: bool,
    place: Placement,
    api: APIOptions | None,
    when_needed: bool = False,
) -> tuple[Teacher | TeacherCard, Sampler | None, str, TeacherLoader | None]:
    """The parts ``Detector.from_settings`` wires, its options checked: the teacher (its weights, or its card), the
    target's sampler, the device the teacher runs on, and the loader of its weights where they wait until a prompt
    needs them.

    Parameters
    ----------
    settings : Settings
    recorded, samples_from, weights, sample, api
        As ``Detector.from_settings``'s.
    place : Placement
        The device, dtype and engine, chosen once by the builder (``hf.placement``), for the teacher and for another
        local model as the target.
    when_needed : bool
        With weights, load them when a prompt first needs them (a ``TeacherLoader`` beside the card), where no local
        target samples on them; False: now.

    Returns
    -------
    teacher : Teacher or TeacherCard
    sampler : Sampler or None
    device : str
    loader : TeacherLoader or None
    """
    if samples_from is not None and not recorded:
        raise BBWDError("samples_from says who drew recorded samples: it needs recorded=True")
    if settings.claims is not None and recorded:
        raise BBWDError(
            "claims 'target' asks the target to list the answers' claims: recorded samples have no target to ask "
            "(give the claims, or a target)"
        )
    api_sampler = api_sampler_for(settings, api) if sample and not recorded else None  # a missing key fails here
    local = sample and not recorded and target_kind(settings) != "api"  # a local target samples on the weights
    later = weights and when_needed and not local
    now = place if weights and not later else None
    teacher = ready_teacher(settings.teacher, now, settings.layer, settings.token_budget)
    sampler = build_sampler(
        settings, teacher if sample and weights else None, place, api_sampler, recorded, samples_from
    )
    device = str(teacher.device) if isinstance(teacher, Teacher) else place.device
    return teacher, sampler, device, TeacherLoader(settings, place) if later else None


def build_sampler(
    settings: Settings,
    teacher: Teacher | TeacherCard | None,
    place: Placement,
    api: Sampler | None,
    recorded: bool,
    samples_from: str | None,
) -> Sampler | None:
    """The target's sampler: recorded samples' (``recorded``, drawn by ``samples_from``), the API's (``api``: built
    first by ``clients.api_sampler_for``, so that a missing key fails before any model loads), a local one on the
    teacher's weights or on another model's in the teacher's placement (``teacher`` a Teacher), or None where
    this process draws nothing."""
    if recorded:
        return RecordedSamples(samples_from)
    if api is not None:
        return api
    if isinstance(teacher, Teacher) and target_kind(settings) != "api":
        return local_sampler_for(settings, teacher, place)
    return None


def settings_as_run(
    settings: Settings, teacher: Teacher | TeacherCard, sampler: Sampler | None, device: str
) -> ReportedSettings:
    """The settings as run: the resolved layer and projection, the device, the API endpoint's host and the local
    sampler (from the sampler, or from the settings where this process has none), what recorded samples say.

    Parameters
    ----------
    settings : Settings
    teacher : Teacher or TeacherCard
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
