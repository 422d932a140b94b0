"""Designs that shape the heads themselves, studied and not shipped (bench/RESULTS.md, "Ahead of the peers": the
rules three to eight): the short answers' heads pooled into one Platt head, no passage heads, or no heads of a kind.

A ``Heads`` design is a ``calibration.fit.Design`` with ``heads`` ("kinds", "pooled", "short", "one"); under
:func:`fitting` the package's fit runs :func:`fit_heads` of that design in place of its own (``kinds``: the
package's, unchanged)::

    with fitting(design):
        fit = fit_files(train, design=design)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any
from unittest import mock

import numpy as np

from blackbox_wd.calibration import fit
from blackbox_wd.calibration.combine import (
    CannotFlag,
    CrossValidation,
    HeadFit,
    Table,
    enough_prompts,
    fit_head,
    heads_on,
    kinds_to_fit,
)

HEADS = ("kinds", "pooled", "short", "one")
POOLED = "short"  # the kind of the rows a pooled head is fitted on: both short kinds
PACKAGE_FIT_HEADS = fit.fit_heads  # the package's own ("kinds"), kept before any patch


@dataclass(frozen=True)
class Heads(fit.Design):
    """A design and which heads there are: ``"kinds"``, heads of each kind of answer, then the heads over every
    kind (the package's); ``"pooled"``, the same but one head per member set over the phrase and sentence answers
    together (each short kind holds a copy), Platt, so that every short answer is ranked by one score; ``"short"``,
    those pooled heads and the heads over every kind (no passage heads); ``"one"``, the heads over every kind alone."""

    heads: str = "kinds"

    def __post_init__(self) -> None:
        if self.heads not in HEADS:
            raise ValueError(f"Design.heads is {self.heads!r}; one of {', '.join(HEADS)}")
        if self.phrase is not None and self.heads != "kinds":
            raise ValueError(f"Design.phrase needs heads of each kind (heads='kinds'), not {self.heads!r}")


def fit_heads(heads: str) -> Callable[..., list[HeadFit]]:
    """``calibration.fit.fit_heads`` under ``heads`` (``Heads.heads``).

    Parameters
    ----------
    heads : str
        One of ``HEADS``.

    Returns
    -------
    callable
        With ``fit_heads``'s parameters: the heads over every row, then the pooled short heads (``pooled``,
        ``short``) and the heads of the other kinds (``pooled``; ``kinds``: the package's own).
    """
    if heads == "kinds":
        return PACKAGE_FIT_HEADS

    def fitted(
        t: Table,
        sets: Sequence[Sequence[str]],
        cv: CrossValidation,
        by_kind: Mapping[str, Sequence[Sequence[str]]] | None = None,
        left_out: list[str] | None = None,
    ) -> list[HeadFit]:
        dropped = [] if left_out is None else left_out

        def flagging(*args: Any, **kwargs: Any) -> HeadFit | None:
            try:
                return fit_head(*args, **kwargs)
            except CannotFlag as e:
                dropped.append(str(e))
                return None

        general = [h for head in sets if (h := flagging(t, head, cv)) is not None]
        fitted = {(h.head.members, h.rows.tobytes()): h for h in general}
        kinds = kinds_to_fit(t, cv.folds) if heads == "pooled" else []
        pool: list[HeadFit] = []
        if heads in ("pooled", "short"):
            t = replace(t, kind=np.where(np.isin(t.kind, fit.SHORT_KINDS), POOLED, t.kind))
            kinds = [kind for kind in kinds if kind not in fit.SHORT_KINDS]
            if enough_prompts(t, t.kind == POOLED, cv.folds):
                short = (by_kind or {}).get(fit.SHORT_KINDS[0], sets)  # both short kinds read the same members
                found = (flagging(t, head, cv, ("platt",), POOLED) for head in heads_on(t, short, POOLED))
                pool = [h for h in found if h is not None]
        of_kinds = [
            replace(same, head=replace(same.head, kind=kind))
            if (same := fitted.get((head, (t.rows(head) & (t.kind == kind)).tobytes()))) is not None
            else flagging(t, head, cv, kind=kind)
            for kind in kinds
            for head in heads_on(t, (by_kind or {}).get(kind, sets), kind)
        ]
        pooled = [replace(h, head=replace(h.head, kind=kind)) for kind in fit.SHORT_KINDS for h in pool]
        return general + pooled + [h for h in of_kinds if h is not None]

    return fitted


@contextmanager
def fitting(design: fit.Design) -> Iterator[None]:
    """The package's fit with ``design``'s heads (a plain ``Design``: its own) while the block runs."""
    heads = getattr(design, "heads", "kinds")
    if heads == "kinds":
        yield
        return
    with mock.patch.object(fit, "fit_heads", fit_heads(heads)):
        yield
