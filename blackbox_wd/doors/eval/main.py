"""``bbwd eval`` end to end: check the request before any model loads, run it, write its outputs.

The CLI parses the options and shows progress; :func:`plan` and :func:`execute` do the rest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackbox_wd.clients.api import make_api_sampler
from blackbox_wd.doors.eval.data import Dataset, load
from blackbox_wd.doors.eval.labeller import LLMLabeller
from blackbox_wd.doors.eval.outputs import write_outputs
from blackbox_wd.doors.eval.run import default_max_tokens, evaluate, protocol, run_fingerprint
from blackbox_wd.errors import BBWDError
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings
from blackbox_wd.signals.baselines.nli import load_nli
from blackbox_wd.teachers.statecache import StateCache


@dataclass(frozen=True)
class EvalOptions:
    """What ``bbwd eval`` was asked for beyond the data, the folder and the settings: built once by the CLI."""

    limit: int | None = None  # score the first N prompts (exemplars excluded)
    protocol_name: str = "few-shot"
    label_from: str = "greedy"
    dse: str = "answer"
    nli: str | None = None
    require_context: bool = False
    max_tokens: int | None = None  # None: ``default_max_tokens`` of the data
    labeller: str | None = None  # --judge
    labeller_base_url: str | None = None
    labeller_api_key_env: str | None = None
    lne: bool = True
    calibration: Any = "auto"  # the wiring's: a Calibration, "auto" (the shipped one when it applies) or None
    samples_from: str | None = None  # recorded data: who drew its samples (reported as ``samples_from``)


@dataclass(frozen=True)
class EvalPlan:
    """An evaluation checked before any model loads: the data, its protocol, the settings and the options."""

    data: str
    output: Path
    dataset: Dataset
    described: dict[str, Any]  # the protocol, part of every row's fingerprint
    settings: Settings
    label_from: str  # the judged answer: the option's, or "recorded" for recorded data
    options: EvalOptions


def plan(data: str, output: Path, settings: dict[str, Any], options: EvalOptions | None = None) -> EvalPlan:
    """Load and check the data and the protocol.

    Parameters
    ----------
    data : str
        The dataset: a JSONL file or a short name.
    output : Path
        The output folder.
    settings : dict of str to Any
        The Settings fields given (``max_tokens`` is the plan's).
    options : EvalOptions or None, default=None
        What else was asked for; None: the defaults.

    Returns
    -------
    plan : EvalPlan

    Raises
    ------
    BBWDError
        Bad data, or options that do not fit it.
    """
    o = options or EvalOptions()
    try:
        dataset = load(data, o.protocol_name, o.limit, o.require_context)
    except (FileNotFoundError, ValueError) as exc:
        raise BBWDError(str(exc)) from None
    if not dataset.items:
        raise BBWDError(
            f"nothing to score in {data} (the few-shot protocol keeps the last 5 records of each QA style as exemplars)"
        )
    described = protocol(dataset, o.label_from, o.dse, o.nli, o.lne)
    if dataset.recorded and settings.get("target"):
        raise BBWDError(
            f"--target: {data} carries its samples, which are scored as they are with no target; drop --target"
        )
    if o.samples_from is not None and not dataset.recorded:
        raise BBWDError(
            f"--samples-from says who drew recorded samples: {data} carries none (its samples are drawn here)"
        )
    tokens = o.max_tokens if o.max_tokens is not None else default_max_tokens(dataset.items)
    return EvalPlan(
        data, output, dataset, described, Settings(**settings, max_tokens=tokens), described["label_from"], o
    )


def execute(p: EvalPlan, progress: Callable[[int, dict[str, Any] | None], None] | None = None) -> str:
    """Load the models, score and label every item (resuming results.jsonl), write the outputs; what was written."""
    o = p.options
    labeller = None
    if o.labeller:
        labeller = LLMLabeller(
            make_api_sampler(
                dataclasses.replace(
                    p.settings, target=o.labeller, base_url=o.labeller_base_url, api_key_env=o.labeller_api_key_env
                )
            )
        )
    detector = Detector.from_settings(
        p.settings,
        o.calibration,
        recorded=p.dataset.recorded,
        samples_from=o.samples_from,
        lne=o.lne,
        all_scores=True,  # a fit reads every member
    )
    if p.settings.cache:
        detector = dataclasses.replace(
            detector,
            cache=StateCache(detector.teacher, Path(p.settings.cache_dir) / "states" if p.settings.cache_dir else None),
        )
    nli_model = load_nli(o.nli, detector.resolved_device) if o.nli else None
    rows = evaluate(
        detector,
        p.dataset,
        p.output,
        label_from=p.label_from,
        dse=o.dse,
        nli=nli_model,
        labeller=labeller,
        progress=progress,
    )
    scored = [r for r in rows if "error" not in r]
    reported = {
        **detector.reported_settings(),
        "fingerprint": run_fingerprint(detector, p.described),
        "data": p.data,
        "protocol": p.described,
        "prompts": len(scored),
        "errors": len(rows) - len(scored),
        "label_judge": o.labeller or "none",
    }
    if not scored:
        raise BBWDError(f"every prompt failed, see {p.output / 'results.jsonl'}")
    paths = write_outputs(scored, p.output, settings=reported, title=f"Hallucination detection on {Path(p.data).name}")
    note = f"{detector.calibration_note}\n" if detector.calibration_note else ""
    return (
        f"{note}wrote {p.output / 'results.jsonl'} ({len(scored)} prompts scored, {len(rows) - len(scored)} "
        "errors), " + ", ".join(str(path) for path in paths.values())
    )
