"""The CPU threads this process may use: one rule for every thread pool bbwd starts (exact OT's pairs, llama.cpp)."""

from __future__ import annotations

import os


def cpu_threads() -> int:
    """The CPUs this process may run on, at most ``OMP_NUM_THREADS`` where that is a positive number.

    Ray sets ``OMP_NUM_THREADS`` to a task's or actor's CPUs, so that the pools of one node's workers do not
    oversubscribe it; a test runner or a user sets it for the same reason.

    Returns
    -------
    int
        At least 1.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    cap = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(cpus, int(cap)) if cap.isdigit() and int(cap) > 0 else cpus)
