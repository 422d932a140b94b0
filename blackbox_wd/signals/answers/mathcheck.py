"""MATH final answers checked with math-verify (Hugging Face; the checker of lighteval and open-r1).

* A response's answer: ``math_verify.parse`` with LaTeX extraction, the last ``\\boxed{}`` first
  (``boxed_match_priority=0``, as lighteval's MATH-500 task), then plain expressions; its result
  is a sympy object and the matched string, or nothing.
* A reference answer (bare LaTeX, e.g. ``\\frac{14}{3}``) is parsed wrapped in ``$...$``.
* Equivalence: ``math_verify.verify(gold, prediction)`` (string, numeric to 6 decimals, symbolic,
  sets, intervals, matrices); it is not symmetric: the reference or the first solution is gold.

Timeouts. math-verify bounds each parse and each comparison by ``TIMEOUT_S`` seconds with SIGALRM,
which only works in a process's main thread. Called from any other thread, the check runs in a
worker process instead (spawned once, the check in its main thread), so an answer such as
``\\boxed{10000000!}`` costs at most the timeouts and never hangs the caller.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from typing import Any, TypeVar

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

TIMEOUT_S = 5  # math-verify's default, per parse and per comparison (whole seconds: signal.alarm)
BOXED = ("\\boxed", "\\fbox")

Returned = TypeVar("Returned")


@lru_cache(maxsize=4096)
def parse_response(text: str) -> tuple[Any, ...]:
    """math-verify's parse of a solution: (sympy object, matched string), or () when nothing parses."""
    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return tuple(parse(text, config, parsing_timeout=TIMEOUT_S))


@lru_cache(maxsize=4096)
def parse_reference(answer: str) -> tuple[Any, ...]:
    """math-verify's parse of a bare LaTeX reference answer, wrapped in ``$...$``."""
    return tuple(parse(f"${answer}$", parsing_timeout=TIMEOUT_S))


def _in_main_thread(func: Callable[..., Returned], *args: Any) -> Returned:
    """func(*args) here when this is the main thread, else in the worker process's main thread."""
    if threading.current_thread() is threading.main_thread():
        return func(*args)
    return _worker().submit(func, *args).result()


@lru_cache(maxsize=1)
def _worker() -> ProcessPoolExecutor:
    """One spawned process that runs checks for threads other than the main one."""
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))


def _correct(response: str, answers: tuple[str, ...]) -> bool:
    pred = parse_response(response)
    return bool(pred) and any(verify(list(parse_reference(a)), list(pred), timeout_seconds=TIMEOUT_S) for a in answers)


def _same(gold: str, prediction: str) -> bool:
    a, b = parse_response(gold), parse_response(prediction)
    if not a or not b:
        return gold.strip() == prediction.strip()
    if {x for x in a if isinstance(x, str)} & {x for x in b if isinstance(x, str)}:
        return True  # the same answer string (verify says so too, after trying sympy first)
    return verify(list(a), list(b), timeout_seconds=TIMEOUT_S)


def math_correct(response: str, answers: Sequence[str]) -> bool:
    """The response's final answer is equivalent to a reference answer (math-verify)."""
    return _in_main_thread(_correct, response, tuple(answers))


def same_final_answer(gold: str, prediction: str) -> bool:
    """The prediction's final answer verifies against the gold solution's; without one, equal strings."""
    return _in_main_thread(_same, gold, prediction)


def has_boxed(text: str) -> bool:
    """The text holds a ``\\boxed`` (or ``\\fbox``) answer."""
    return any(b in text for b in BOXED)
