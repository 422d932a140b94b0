"""Pairwise exact 2-Wasserstein distances between uniform empirical measures.

D_ij = sqrt(EMD2) with squared-Euclidean ground cost, the value ``ot.emd2`` gives, computed faster:
points are centred on the prompt's mean (exact for squared Euclidean, better conditioned) and cost
blocks are ||x||^2 + ||y||^2 - 2 x.y in float64. Small pairs take their blocks from one Gram matrix
of the prompt and are solved serially; large pairs build their blocks on a thread per core (both
solvers release the GIL, BLAS is pinned to one thread), and have row and column minima subtracted
before the solver, which leaves the optimal plans unchanged and the solvers faster. Equal-size pairs
go to ``scipy.optimize.linear_sum_assignment`` (an optimal plan between uniform measures of equal
size is a permutation), others to POT's compiled network simplex; where asked (``replicate``: a run of one prompt,
whose numpy teacher imports no torch, while POT imports torch for its backends), those of a small common size to the
same assignment on their points repeated to that size (``_replicated``), exact too.

:func:`token_costs_to_each` keeps more of a solve than its value: each point's share of the cost in
the optimal plan, which scores an answer's sentences (``blackbox_wd.measure.sentences``) from the very plans
that give its AnswerWD.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np
from scipy.optimize import linear_sum_assignment
from threadpoolctl import ThreadpoolController

from blackbox_wd.cpus import cpu_threads
from blackbox_wd.errors import BBWDError

MAX_ITER = 10_000_000
GRAM_POINTS = 2048  # all cost blocks from one Gram matrix up to this many points (32 MiB)
_OPTIMAL = 1  # POT's ProblemType: 0 infeasible, 1 optimal, 2 unbounded, 3 max_iter reached
_THREAD_WORK = 1024  # mean m_i * m_j per pair below which the solver's GIL-held overhead defeats threads
_REDUCE_WORK = 4096  # m * n from which reducing the cost block pays for its copy
REPLICATE_MAX = 256  # the largest common size a one-prompt run solves by assignment (~2 ms; POT's simplex: ~0.02 ms)


@cache
def _blas() -> ThreadpoolController:
    """The process's BLAS controller, found once (scanning the loaded libraries takes ~0.7 ms)."""
    return ThreadpoolController()


def _cost(x: np.ndarray, y: np.ndarray, xx: np.ndarray, yy: np.ndarray) -> np.ndarray:
    """Squared-Euclidean cost block ||x_i||^2 + ||y_j||^2 - 2 x_i.y_j, clipped at 0, C-ordered."""
    c = x @ y.T
    c *= -2.0
    c += xx[:, None]
    c += yy[None, :]
    np.maximum(c, 0.0, out=c)
    return c


def _solver_cost(cost: np.ndarray) -> tuple[np.ndarray, bool]:
    """The cost block the solver runs on, and whether it is reduced.

    Subtracting row then column minima leaves the optimal plans unchanged (the marginals are fixed),
    halves linear_sum_assignment's time and saves ~10% of the network simplex's; it pays from
    ``_REDUCE_WORK`` entries. Values are always taken on the original cost.
    """
    if cost.size < _REDUCE_WORK:
        return np.ascontiguousarray(cost), False
    reduced = cost - cost.min(axis=1, keepdims=True)
    reduced -= reduced.min(axis=0, keepdims=True)
    return reduced, True


def _simplex(cost: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """An exact optimal plan of POT's network simplex and its cost on ``cost``; BBWDError unless optimal."""
    import ot  # POT imports scikit-learn (~1 s): loaded where the first simplex runs, not with this module

    # private API of pot==0.9.7.post1: emd_c(a, b, M, max_iter, numThreads, alpha_init, beta_init)
    emd_c = getattr(getattr(ot.lp, "emd_wrap", None), "emd_c", None)
    if emd_c is None:  # pragma: no cover - another POT layout: the public wrapper
        plan, log = ot.emd(a, b, cost, numItermax=MAX_ITER, log=True)
        value, code = float(np.sum(plan * cost)), log["result_code"]
    else:
        plan, value, _, _, code = emd_c(a, b, cost, MAX_ITER, 1, None, None)
    if code != _OPTIMAL:
        raise BBWDError(
            f"exact OT solver stopped without an optimal plan (code {code}) on a {cost.shape[0]}x"
            f"{cost.shape[1]} problem"
        )
    return plan, float(value)


def _solve(cost: np.ndarray, a: np.ndarray, b: np.ndarray, replicate: int = 0) -> tuple[float, np.ndarray]:
    """Exact optimal transport between weights ``a`` on the rows and ``b`` on the columns (uniform): the plan's
    cost, and each row's cost in it per unit of its mass, sum_j P_ij C_ij / a_i (their mean is the cost).

    The one dispatch of the solvers: a single row or column has one plan; equal sizes go to
    linear_sum_assignment (Birkhoff: some optimal plan is a permutation scaled by 1/n); others to POT's
    network simplex, or, those of a common size up to ``replicate``, to the assignment of their copies
    (:func:`_replicated`). Values are always taken on the original cost, whatever block the solver
    ran on.
    """
    n, m = cost.shape
    if n == 1 or m == 1:  # the single row spreads its mass evenly, or every row sends all of it to the column
        return float(cost.mean()), cost.mean(axis=1)
    solver_cost, reduced = _solver_cost(cost)
    if n == m:  # a permutation: each row pays its one entry
        rows, cols = linear_sum_assignment(solver_cost)
        paid = cost[rows, cols]
        per_row = np.empty(n)
        per_row[rows] = paid
        return float(paid.mean()), per_row
    if math.lcm(n, m) <= replicate:
        return _replicated(cost, solver_cost)
    plan, value = _simplex(solver_cost, a, b)
    per_row = np.einsum("ij,ij->i", plan, cost) / a
    return (float(np.vdot(plan, cost)) if reduced else value), per_row


def _replicated(cost: np.ndarray, solver_cost: np.ndarray) -> tuple[float, np.ndarray]:
    """Exact optimal transport between uniform measures of n and m points by assignment: each row repeated L / n
    times and each column L / m times (L = lcm(n, m)) make uniform measures of L points each, whose optimal plans
    include a permutation (Birkhoff), and an optimal assignment of the copies is an optimal plan of the originals
    (the transport polytope of integer margins has integer vertices). The plan's cost, and each row's cost in it per
    unit of its mass (the mean over its copies), as :func:`_solve` gives them."""
    n, m = cost.shape
    size = math.lcm(n, m)
    per, across = size // n, size // m
    rows, cols = linear_sum_assignment(np.repeat(np.repeat(solver_cost, per, axis=0), across, axis=1))
    paid = cost[rows // per, cols // across]
    return float(paid.mean()), np.bincount(rows // per, weights=paid, minlength=n) / per


def check_clouds(clouds: Sequence[np.ndarray], what: str = "cloud") -> None:
    """BBWDError naming the first of ``clouds`` (each called ``what``) that is not a non-empty 2-d array of the
    first one's dimension."""
    for i, c in enumerate(clouds):
        shape = np.shape(c)
        if len(shape) != 2 or shape[0] == 0:
            raise BBWDError(f"{what} {i} has shape {shape}: need a non-empty (n_points, dim) array")
        if shape[1] != np.shape(clouds[0])[1]:
            raise BBWDError(f"{what} {i} has dimension {shape[1]}, {what} 0 has {np.shape(clouds[0])[1]}")


def _prepare(clouds: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All points in one float64 array centred on their mean, and the K + 1 row offsets of the clouds in it."""
    check_clouds(clouds)
    points = np.concatenate(clouds, dtype=np.float64)
    points -= points.mean(axis=0)
    return points, np.cumsum([0] + [len(c) for c in clouds])


def _blocks(points: np.ndarray, starts: np.ndarray, gram: bool) -> Callable[[int, int], np.ndarray]:
    """A function giving the cost block of pair (i, j): a view of one Gram matrix, or built on call."""
    norms = np.einsum("ij,ij->i", points, points)
    if gram and len(points) <= GRAM_POINTS:
        full = _cost(points, points, norms, norms)
        return lambda i, j: full[starts[i] : starts[i + 1], starts[j] : starts[j + 1]]
    xs = [points[starts[i] : starts[i + 1]] for i in range(len(starts) - 1)]
    ns = [norms[starts[i] : starts[i + 1]] for i in range(len(starts) - 1)]
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


def pairwise_w2(clouds: Sequence[np.ndarray], workers: int | None = None, *, replicate: int = 0) -> np.ndarray:
    """The symmetric K x K matrix of exact W2 distances between K point clouds, zero on the diagonal.

    Entry (i, j) is sqrt(EMD2) between the uniform measures on the rows of cloud i and cloud j, with the
    squared-Euclidean ground cost: the value of ``sqrt(ot.emd2(a, b, ot.dist(x, y)))``, to 1e-9 relative
    or better. Clouds with equal points are exactly 0 apart.

    Parameters
    ----------
    clouds : sequence of K array-like of shape (m_k, dim)
        The point clouds (a response's token states): any real dtype, computed in float64; each cloud
        non-empty, all of one ``dim``; the sizes m_k may differ.
    workers : int or None, default=None
        Threads for the pairs large enough to pay for them; None: the CPUs this process may use, at most
        ``OMP_NUM_THREADS``. The values do not depend on it.
    replicate : int, default=0
        Unequal pairs whose sizes' least common multiple is at most this are solved by assignment on their points
        repeated to that size (exact, and without importing POT, which imports torch); 0: all by POT's simplex. A
        one-prompt run gives ``REPLICATE_MAX``; the values agree with the simplex's to rounding (1e-15).

    Returns
    -------
    D : ndarray of shape (K, K), dtype float64
        The distances: symmetric, non-negative, 0 on the diagonal; shape (0, 0) for no clouds.

    Raises
    ------
    BBWDError
        A cloud is empty or not 2-d, or the clouds' dimensions differ.

    Examples
    --------
    >>> pairwise_w2([np.zeros((1, 2)), np.array([[3.0, 4.0]]), np.array([[0.0, 0.0], [6.0, 8.0]])]).round(6).tolist()
    [[0.0, 5.0, 7.071068], [5.0, 0.0, 5.0], [7.071068, 5.0, 0.0]]
    """
    k = len(clouds)
    return _w2_pairs(clouds, [(i, j) for i in range(k) for j in range(i + 1, k)], workers, replicate)


def w2_to_each(
    x: np.ndarray, clouds: Sequence[np.ndarray], workers: int | None = None, *, replicate: int = 0
) -> np.ndarray:
    """Exact W2 from the cloud ``x`` to each of ``clouds``: a vector of len(clouds).

    The same solvers as :func:`pairwise_w2`, run on the K pairs (x, cloud j) only.

    Examples
    --------
    >>> w2_to_each(np.zeros((1, 2)), [np.array([[3.0, 4.0]]), np.zeros((2, 2))]).tolist()
    [5.0, 0.0]
    """
    if not clouds:
        return np.zeros(0)
    return _w2_pairs([x, *clouds], [(0, j) for j in range(1, len(clouds) + 1)], workers, replicate)[0, 1:].copy()


def token_costs_to_each(
    x: np.ndarray, clouds: Sequence[np.ndarray], workers: int | None = None, *, replicate: int = 0
) -> np.ndarray:
    """Each point's transport cost from the cloud ``x`` to each of ``clouds``, in the exact optimal plans.

    Entry (k, t) is c_kt = m * sum_j P^k_tj C_tj, with P^k the exact optimal plan between the uniform
    measures on ``x`` (m points) and on cloud k (the solve of :func:`w2_to_each`, one plan per cloud)
    and C the squared-Euclidean cost on the centred points. Row k's mean is EMD2(x, cloud k), so
    :func:`w2_from_token_costs` gives :func:`w2_to_each`'s distances. A cloud identical to ``x`` has a
    row of zeros.

    Parameters
    ----------
    x : array-like of shape (m, dim)
        The cloud whose points are costed (a judged answer's token states); any real dtype, computed in
        float64.
    clouds : sequence of K array-like of shape (m_k, dim)
        The clouds it is transported to (the samples' token states), each non-empty, of the same ``dim``.
    workers : int or None, default=None
        Threads for large pairs, as in :func:`pairwise_w2`; the values do not depend on it.
    replicate : int, default=0
        As in :func:`pairwise_w2`.

    Returns
    -------
    costs : ndarray of shape (K, m), dtype float64
        Squared-distance units, non-negative up to rounding; shape (0, m) for no clouds.

    Raises
    ------
    BBWDError
        A cloud is empty or not 2-d, or the dimensions differ.

    Examples
    --------
    >>> token_costs_to_each(np.array([[0.0, 0.0], [2.0, 0.0]]), [np.array([[1.0, 0.0]])]).tolist()
    [[1.0, 1.0]]
    """
    out = np.zeros((len(clouds), len(x)))
    if not clouds:
        return out
    wanted = [(0, j) for j in range(1, len(clouds) + 1)]
    for (_, j), (_, per_row) in _each_pair([x, *clouds], wanted, workers, replicate).items():
        out[j - 1] = per_row
    return out


def w2_from_token_costs(costs: np.ndarray) -> np.ndarray:
    """The W2 distance of each row of :func:`token_costs_to_each`: sqrt of the row's mean cost."""
    return np.sqrt(np.maximum(np.asarray(costs, dtype=float).mean(axis=1), 0.0))


def _w2_pairs(
    clouds: Sequence[np.ndarray], wanted: list[tuple[int, int]], workers: int | None, replicate: int
) -> np.ndarray:
    """The K x K matrix of exact W2 distances on the ``wanted`` pairs (i < j) and their mirrors, 0 elsewhere."""
    k = len(clouds)
    d = np.zeros((k, k))
    for (i, j), (value, _) in _each_pair(clouds, wanted, workers, replicate).items():
        d[i, j] = d[j, i] = value
    return np.sqrt(np.maximum(d, 0.0), out=d)


def _each_pair(
    clouds: Sequence[np.ndarray], wanted: list[tuple[int, int]], workers: int | None, replicate: int
) -> dict[tuple[int, int], tuple[float, np.ndarray]]:
    """:func:`_solve` on the cost block of each ``wanted`` pair (i, j) of clouds that differ; identical clouds
    are exactly 0 apart, not their cost block's rounding, and are left out."""
    k = len(clouds)
    if k < 2 or not wanted:
        return {}
    points, starts = _prepare(clouds)
    sizes = np.diff(starts).tolist()
    weights = [np.full(m, 1.0 / m) for m in sizes]
    totals = [w.sum() for w in weights]
    first: dict[bytes, int] = {}
    same = [first.setdefault(points[starts[i] : starts[i + 1]].tobytes(), i) for i in range(k)]
    # Largest problems first, so the last ones to finish are short.
    pairs = sorted(((i, j) for i, j in wanted if same[i] != same[j]), key=lambda p: -sizes[p[0]] * sizes[p[1]])
    if not pairs:
        return {}
    # Small pairs run serially from one Gram matrix; large ones build their blocks on the threads.
    small = sum(sizes[i] * sizes[j] for i, j in pairs) / len(pairs) < _THREAD_WORK
    n = 1 if small else cpu_threads() if workers is None else workers
    block = _blocks(points, starts, gram=small)
    out: dict[tuple[int, int], tuple[float, np.ndarray]] = {}

    def one(i: int, j: int) -> None:
        # b scaled to a's total mass to the last bit, as ot.emd2 does
        out[i, j] = _solve(block(i, j), weights[i], weights[j] * (totals[i] / totals[j]), replicate)

    if small:
        for pair in pairs:
            one(*pair)
    else:  # BLAS on one thread whatever the workers, so that the values do not depend on them
        with _blas().limit(limits=1, user_api="blas"):
            _run(pairs, one, n)
    return out
