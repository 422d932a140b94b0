"""Pairwise exact 2-Wasserstein distances between uniform empirical measures.

D_ij = sqrt(EMD2) with squared-Euclidean ground cost, the value ``ot.emd2`` gives, computed faster:
points are centred on the prompt's mean (exact for squared Euclidean, better conditioned) and cost
blocks are ||x||^2 + ||y||^2 - 2 x.y in float64. Small pairs take their blocks from one Gram matrix
of the prompt and are solved serially; large pairs build their blocks on a thread per core (both
solvers release the GIL, BLAS is pinned to one thread), and have row and column minima subtracted
before the solver, which leaves the optimal plans unchanged and the solvers faster. Equal-size pairs
go to ``scipy.optimize.linear_sum_assignment`` (an optimal plan between uniform measures of equal
size is a permutation), others to POT's compiled network simplex.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
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
GRAM_POINTS = 2048  # all cost blocks from one Gram matrix up to this many points (32 MiB)
_OPTIMAL = 1  # POT's ProblemType: 0 infeasible, 1 optimal, 2 unbounded, 3 max_iter reached
_THREAD_WORK = 1024  # mean m_i * m_j per pair below which the solver's GIL-held overhead defeats threads
_REDUCE_WORK = 4096  # m * n from which reducing the cost block pays for its copy


@cache
def _blas() -> ThreadpoolController:
    """The process's BLAS controller, found once (scanning the loaded libraries takes ~0.7 ms)."""
    return ThreadpoolController()


def _workers() -> int:
    """Threads for the pair pool: the CPUs this process may run on, at most ``OMP_NUM_THREADS`` when set
    (Ray sets it to a task's CPUs, so that the scoring tasks of a node do not oversubscribe it)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    cap = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(cpus, int(cap)) if cap.isdigit() and int(cap) > 0 else cpus)


def _cost(x: np.ndarray, y: np.ndarray, xx: np.ndarray, yy: np.ndarray) -> np.ndarray:
    """Squared-Euclidean cost block ||x_i||^2 + ||y_j||^2 - 2 x_i.y_j, clipped at 0, C-ordered."""
    c = x @ y.T
    c *= -2.0
    c += xx[:, None]
    c += yy[None, :]
    np.maximum(c, 0.0, out=c)
    return c


def _emd2(cost: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Exact optimal transport cost between uniform weights ``a`` on the rows and ``b`` on the columns."""
    n, m = cost.shape
    if n == 1 or m == 1:  # the only plan spreads the single point's mass evenly
        return float(cost.mean())
    reduce = n * m >= _REDUCE_WORK
    if reduce:
        # Subtracting row then column minima leaves the optimal plans unchanged (the marginals are
        # fixed), halves linear_sum_assignment's time and saves ~10% of the network simplex's;
        # the value is taken on the original cost.
        solver_cost = cost - cost.min(axis=1, keepdims=True)
        solver_cost -= solver_cost.min(axis=0, keepdims=True)
    else:
        solver_cost = np.ascontiguousarray(cost)
    if n == m:  # Birkhoff: some optimal plan is a permutation scaled by 1/n
        rows, cols = linear_sum_assignment(solver_cost)
        return float(cost[rows, cols].mean())
    if _emd_c is None:  # pragma: no cover - another POT layout: the public wrapper
        plan, log = ot.emd(a, b, solver_cost, numItermax=MAX_ITER, log=True)
        value, code = float(np.sum(plan * solver_cost)), log["result_code"]
    else:
        plan, value, _, _, code = _emd_c(a, b, solver_cost, MAX_ITER, 1, None, None)
    if code != _OPTIMAL:
        raise BBWDError(f"exact OT solver stopped without an optimal plan (code {code}) on a {n}x{m} problem")
    return float(np.vdot(plan, cost)) if reduce else float(value)


def _prepare(clouds: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All points in one float64 array centred on their mean, and the K + 1 row offsets of the clouds in it."""
    for i, c in enumerate(clouds):
        shape = np.shape(c)
        if len(shape) != 2 or shape[0] == 0:
            raise BBWDError(f"cloud {i} has shape {shape}: need a non-empty (n_points, dim) array")
        if shape[1] != np.shape(clouds[0])[1]:
            raise BBWDError(f"cloud {i} has dimension {shape[1]}, cloud 0 has {np.shape(clouds[0])[1]}")
    points = np.concatenate(clouds, dtype=np.float64)
    points -= points.mean(axis=0)
    return points, np.cumsum([0] + [len(c) for c in clouds])


def _blocks(points: np.ndarray, starts: np.ndarray, gram: bool) -> Callable[[int, int], np.ndarray]:
    """A function giving the cost block of pair (i, j): a view of one Gram matrix, or built on call."""
    norms = np.einsum("ij,ij->i", points, points)
    if gram and len(points) <= GRAM_POINTS:
        full = _cost(points, points, norms, norms)
        return lambda i, j: full[starts[i]:starts[i + 1], starts[j]:starts[j + 1]]
    xs = [points[starts[i]:starts[i + 1]] for i in range(len(starts) - 1)]
    ns = [norms[starts[i]:starts[i + 1]] for i in range(len(starts) - 1)]
    return lambda i, j: _cost(xs[i], xs[j], ns[i], ns[j])


def _drain(pairs: Iterator[tuple[int, int]], lock: threading.Lock, solve: Callable[[int, int], None]) -> None:
    """Solve pairs taken one at a time from the shared iterator until it is empty."""
    while True:
        with lock:
            pair = next(pairs, None)
        if pair is None:
            return
        solve(*pair)


def _run(pairs: list[tuple[int, int]], solve: Callable[[int, int], None], workers: int) -> None:
    """Solve every pair, taken in order from one shared queue, on ``workers`` threads."""
    it, lock, n = iter(pairs), threading.Lock(), min(workers, len(pairs))
    if n <= 1:
        _drain(it, lock, solve)
        return
    with ThreadPoolExecutor(max_workers=n) as pool:
        for future in [pool.submit(_drain, it, lock, solve) for _ in range(n)]:
            future.result()  # re-raise any worker's exception


def w2(x: np.ndarray, y: np.ndarray) -> float:
    """Exact W2 = sqrt(EMD2) between uniform measures on the rows of ``x`` and ``y``."""
    return float(pairwise_w2([x, y])[0, 1])


def pairwise_w2(clouds: Sequence[np.ndarray], workers: int | None = None) -> np.ndarray:
    """The symmetric K x K matrix of exact W2 distances, zero on the diagonal."""
    k = len(clouds)
    return _w2_pairs(clouds, [(i, j) for i in range(k) for j in range(i + 1, k)], workers)


def w2_to_each(x: np.ndarray, clouds: Sequence[np.ndarray], workers: int | None = None) -> np.ndarray:
    """Exact W2 from the cloud ``x`` to each of ``clouds``: a vector of len(clouds).

    The same solvers as :func:`pairwise_w2`, run on the K pairs (x, cloud j) only.

    Examples
    --------
    >>> w2_to_each(np.zeros((1, 2)), [np.array([[3.0, 4.0]]), np.zeros((2, 2))]).tolist()
    [5.0, 0.0]
    """
    if not clouds:
        return np.zeros(0)
    return _w2_pairs([x, *clouds], [(0, j) for j in range(1, len(clouds) + 1)], workers)[0, 1:].copy()


def _w2_pairs(clouds: Sequence[np.ndarray], wanted: list[tuple[int, int]], workers: int | None) -> np.ndarray:
    """The K x K matrix of exact W2 distances on the ``wanted`` pairs (i < j) and their mirrors, 0 elsewhere."""
    k = len(clouds)
    d = np.zeros((k, k))
    if k < 2 or not wanted:
        return d
    points, starts = _prepare(clouds)
    sizes = np.diff(starts).tolist()
    weights = [np.full(m, 1.0 / m) for m in sizes]
    totals = [w.sum() for w in weights]
    # Identical clouds are exactly 0 apart, not their cost block's rounding: their pairs are skipped.
    first: dict[bytes, int] = {}
    same = [first.setdefault(points[starts[i]:starts[i + 1]].tobytes(), i) for i in range(k)]
    # Largest problems first, so the last ones to finish are short.
    pairs = sorted(((i, j) for i, j in wanted if same[i] != same[j]), key=lambda p: -sizes[p[0]] * sizes[p[1]])
    if not pairs:
        return d
    # Small pairs run serially from one Gram matrix; large ones build their blocks on the threads.
    small = sum(sizes[i] * sizes[j] for i, j in pairs) / len(pairs) < _THREAD_WORK
    n = 1 if small else _workers() if workers is None else workers
    block = _blocks(points, starts, gram=small)

    def solve(i: int, j: int) -> None:
        # b scaled to a's total mass to the last bit, as ot.emd2 does
        d[i, j] = d[j, i] = _emd2(block(i, j), weights[i], weights[j] * (totals[i] / totals[j]))

    if small:
        for pair in pairs:
            solve(*pair)
    else:  # BLAS on one thread whatever the workers, so that the values do not depend on them
        with _blas().limit(limits=1, user_api="blas"):
            _run(pairs, solve, n)
    return np.sqrt(np.maximum(d, 0.0), out=d)
