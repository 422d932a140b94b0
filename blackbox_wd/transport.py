"""Pairwise exact 2-Wasserstein distances between uniform empirical measures.

D_ij = sqrt(EMD2) with squared-Euclidean ground cost, the value ``ot.emd2`` gives, computed faster:
points are centred on the prompt's global mean (exact for squared Euclidean, better conditioned),
each cost block is built in float64 from ||x||^2 + ||y||^2 - 2 x.y where its pair is solved,
equal-size pairs go to ``scipy.optimize.linear_sum_assignment`` (an optimal plan between uniform
measures of equal size is a permutation), other pairs to POT's compiled network simplex, and
pairs run on a small thread pool (both solvers release the GIL) with BLAS pinned to one thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np
import ot
from scipy.optimize import linear_sum_assignment
from threadpoolctl import ThreadpoolController

from blackbox_wd.errors import BBWDError

try:  # private API of pot==0.9.7.post1: emd_c(a, b, M, max_iter, numThreads, alpha_init, beta_init)
    from ot.lp.emd_wrap import emd_c as _emd_c
except ImportError:  # pragma: no cover - another POT layout: use the public wrapper
    _emd_c = None

MAX_ITER = 10_000_000
_OPTIMAL = 1  # POT's ProblemType: 0 infeasible, 1 optimal, 2 unbounded, 3 max_iter reached
_SERIAL_WORK = 20_000  # sum of m_i * m_j below which a thread pool costs more than it saves


@cache
def _blas() -> ThreadpoolController:
    """The process's BLAS controller, found once (scanning the loaded libraries takes ~0.7 ms)."""
    return ThreadpoolController()


def _workers() -> int:
    """Threads for the pair pool: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _cost(x: np.ndarray, y: np.ndarray, xx: np.ndarray, yy: np.ndarray) -> np.ndarray:
    """Squared-Euclidean cost block ||x_i||^2 + ||y_j||^2 - 2 x_i.y_j, clipped at 0, C-ordered."""
    c = x @ y.T
    c *= -2.0
    c += xx[:, None]
    c += yy[None, :]
    np.maximum(c, 0.0, out=c)
    return c


def _emd2(cost: np.ndarray) -> float:
    """Exact optimal transport cost between uniform measures on the rows and columns of ``cost``."""
    n, m = cost.shape
    if n == 1 or m == 1:  # the only plan spreads the single point's mass evenly
        return float(cost.mean())
    if n == m:  # Birkhoff: some optimal plan is a permutation scaled by 1/n
        rows, cols = linear_sum_assignment(cost)
        return float(cost[rows, cols].mean())
    a = np.full(n, 1.0 / n)
    b = np.full(m, 1.0 / m)
    b *= a.sum() / b.sum()  # equal total mass to the last bit, as ot.emd2 does
    if _emd_c is None:  # pragma: no cover - fallback path
        value, log = ot.emd2(a, b, cost, numItermax=MAX_ITER, log=True)
        code = log["result_code"]
    else:
        _, value, _, _, code = _emd_c(a, b, cost, MAX_ITER, 1, None, None)
    if code != _OPTIMAL:
        raise BBWDError(f"exact OT solver stopped without an optimal plan (code {code}) on a {n}x{m} problem")
    return float(value)


def _prepare(clouds: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Float64 copies centred on the mean of all points, and their squared row norms."""
    xs = [np.asarray(c, dtype=np.float64) for c in clouds]
    for i, x in enumerate(xs):
        if x.ndim != 2 or x.shape[0] == 0:
            raise BBWDError(f"cloud {i} has shape {x.shape}: need a non-empty (n_points, dim) array")
        if x.shape[1] != xs[0].shape[1]:
            raise BBWDError(f"cloud {i} has dimension {x.shape[1]}, cloud 0 has {xs[0].shape[1]}")
    mean = np.concatenate(xs).mean(axis=0)
    xs = [np.ascontiguousarray(x - mean) for x in xs]
    return xs, [np.einsum("ij,ij->i", x, x) for x in xs]


def _run(tasks: list[Callable[[], None]], workers: int) -> None:
    """Run the tasks, taken in order, on ``workers`` threads."""
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            task()
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(tasks))) as pool:
        list(pool.map(lambda task: task(), tasks))  # list(): re-raise any task's exception


def w2(x: np.ndarray, y: np.ndarray) -> float:
    """Exact W2 = sqrt(EMD2) between uniform measures on the rows of ``x`` and ``y``."""
    return float(pairwise_w2([x, y])[0, 1])


def pairwise_w2(clouds: Sequence[np.ndarray], workers: int | None = None) -> np.ndarray:
    """The symmetric K x K matrix of exact W2 distances, zero on the diagonal."""
    k = len(clouds)
    d = np.zeros((k, k))
    if k < 2:
        return d
    xs, norms = _prepare(clouds)
    sizes = [x.shape[0] for x in xs]
    # Largest problems first, so the last ones to finish are short.
    pairs = sorted(((i, j) for i in range(k) for j in range(i + 1, k)), key=lambda p: -sizes[p[0]] * sizes[p[1]])

    def task(i: int, j: int) -> Callable[[], None]:
        def solve() -> None:
            if xs[i].shape == xs[j].shape and np.array_equal(xs[i], xs[j]):
                return  # identical clouds: exactly 0, not sqrt of the cost block's rounding
            d[i, j] = d[j, i] = np.sqrt(max(_emd2(_cost(xs[i], xs[j], norms[i], norms[j])), 0.0))
        return solve

    work = sum(sizes[i] * sizes[j] for i, j in pairs)
    n = (_workers() if workers is None else workers) if work >= _SERIAL_WORK else 1
    with _blas().limit(limits=1, user_api="blas"):
        _run([task(i, j) for i, j in pairs], n)
    return d
