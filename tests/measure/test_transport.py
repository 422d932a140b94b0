"""Exact W2 between uniform empirical measures: hand-worked values and agreement with POT's ot.emd2."""

from __future__ import annotations

import numpy as np
import ot
import pytest

from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.transport import pairwise_w2, w2


def naive_pairwise(clouds: list[np.ndarray]) -> np.ndarray:
    """The reference: ot.dist + ot.emd2 on every pair, in float64, no centring."""
    k = len(clouds)
    d = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            x, y = np.asarray(clouds[i], float), np.asarray(clouds[j], float)
            a, b = np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y))
            cost = ot.emd2(a, b, ot.dist(x, y, metric="sqeuclidean"), numItermax=10_000_000)
            d[i, j] = d[j, i] = np.sqrt(max(cost, 0.0))
    return d


def assert_matches_naive(clouds: list[np.ndarray], rtol: float = 1e-9) -> np.ndarray:
    """pairwise_w2 equals the naive loop to ``rtol`` relative on every off-diagonal entry."""
    fast, ref = pairwise_w2(clouds), naive_pairwise(clouds)
    iu = np.triu_indices(len(clouds), k=1)
    assert np.all(ref[iu] > 0)
    rel = np.abs(fast[iu] - ref[iu]) / ref[iu]
    assert rel.max() <= rtol, f"max relative deviation {rel.max():.3e}"
    return fast


def random_clouds(rng: np.random.Generator, sizes: list[int], dim: int = 128, norm: float = 30.0) -> list[np.ndarray]:
    """Token-state-like clouds: a shared offset of the given norm plus per-response spread."""
    offset = rng.normal(size=dim)
    offset *= norm / np.linalg.norm(offset)
    return [
        offset
        + rng.normal(size=(m, dim)) * (0.2 * norm / np.sqrt(dim))
        + rng.normal(size=dim) * 0.05 * norm / np.sqrt(dim)
        for m in sizes
    ]


def test_identical_sets_give_zero() -> None:
    x = np.random.default_rng(0).normal(size=(7, 5)) * 30
    assert w2(x, x.copy()) == 0.0
    d = pairwise_w2([x, x.copy(), x + 1.0])
    assert d[0, 1] == 0.0
    assert d[0, 2] == pytest.approx(np.sqrt(5.0), rel=1e-9)  # every point moves by (1,1,1,1,1)


def test_two_single_points_give_their_distance() -> None:
    assert w2(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0]])) == pytest.approx(5.0, rel=1e-12)
    assert w2(np.array([[1.0, 2.0, 3.0]]), np.array([[1.0, 2.0, 3.0]])) == 0.0


def test_equal_sizes_give_the_optimal_assignment() -> None:
    # Squared costs C[i, j] = |x_i - y_j|^2:
    #            y1=(0,3) y2=(3,0) y3=(1,0)
    # x1=(0,0)      9        9        1
    # x2=(2,0)     13        1        1
    # x3=(0,2)      1       13        5
    # The six permutations cost 15, 23, 27, 11, 27 and 3; the best is x1->y3, x2->y2, x3->y1
    # (1 + 1 + 1 = 3), so W2^2 = 3 / 3 = 1. Matching by index (x_i -> y_i) would give 15 / 3 = 5.
    x = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    y = np.array([[0.0, 3.0], [3.0, 0.0], [1.0, 0.0]])
    assert w2(x, y) == pytest.approx(1.0, rel=1e-12)
    assert w2(x, y[::-1]) == pytest.approx(1.0, rel=1e-12)  # row order does not matter


def test_one_point_against_two() -> None:
    # The single point sends half its mass to each: W2^2 = (1^2 + 3^2) / 2 = 5.
    x = np.array([[0.0, 0.0]])
    y = np.array([[1.0, 0.0], [-3.0, 0.0]])
    assert w2(x, y) == pytest.approx(np.sqrt(5.0), rel=1e-12)
    assert w2(y, x) == pytest.approx(np.sqrt(5.0), rel=1e-12)


def test_two_points_against_three() -> None:
    # x = (0,0), (6,0) with mass 1/2 each; y = (0,1), (3,1), (6,1) with mass 1/3 each.
    # Every cost is (horizontal gap)^2 + 1, so the plan is the monotone one along the first axis:
    #   (0,0) -> (0,1): 1/3, (0,0) -> (3,1): 1/6, (6,0) -> (3,1): 1/6, (6,0) -> (6,1): 1/3.
    # W2^2 = 1/3 * 1 + 1/6 * (9 + 1) + 1/6 * (9 + 1) + 1/3 * 1 = 2/3 + 20/6 = 4, so W2 = 2.
    # (Any other plan moves more than 1/6 of the mass across a gap of at least 3: e.g. the plan
    # (0,0) -> (0,1), (3,1) with 1/3, 1/6 is the only way to fill (0,1) without a gap of 6.)
    x = np.array([[0.0, 0.0], [6.0, 0.0]])
    y = np.array([[0.0, 1.0], [3.0, 1.0], [6.0, 1.0]])
    assert w2(x, y) == pytest.approx(2.0, rel=1e-12)
    d = pairwise_w2([x, y, x[:1]])
    # (0,0) against x: half the mass moves 6 -> W2^2 = 36 / 2 = 18.
    # (0,0) against y: W2^2 = (1 + 10 + 37) / 3 = 16.
    assert d[0, 1] == pytest.approx(2.0, rel=1e-12)
    assert d[0, 2] == pytest.approx(np.sqrt(18.0), rel=1e-12)
    assert d[1, 2] == pytest.approx(4.0, rel=1e-12)


def test_matrix_is_symmetric_with_zero_diagonal() -> None:
    rng = np.random.default_rng(1)
    clouds = random_clouds(rng, [3, 5, 5, 8, 1, 6])
    d = pairwise_w2(clouds)
    assert d.shape == (6, 6)
    assert np.array_equal(d, d.T)
    assert np.all(np.diag(d) == 0.0)
    assert np.all(d[~np.eye(6, dtype=bool)] > 0)


def test_fewer_than_two_clouds() -> None:
    assert pairwise_w2([]).shape == (0, 0)
    assert np.array_equal(pairwise_w2([np.ones((3, 2))]), np.zeros((1, 1)))


@pytest.mark.parametrize(
    ("sizes", "norm"),
    [
        ([5, 9, 13, 1, 17, 24, 8, 2, 11, 16], 30.0),  # mixed, with a single-token response
        ([16] * 10, 30.0),  # equal sizes: the assignment path
        ([12, 12, 7, 12, 30, 30, 1, 1], 300.0),  # real hidden-state norms, mixed and equal pairs
        ([40, 64], 300.0),  # K = 2
        ([1, 1], 300.0),
        ([96, 150, 96, 128], 30.0),  # large enough for the thread pool
    ],
)
def test_fast_path_equals_naive_emd2(sizes: list[int], norm: float) -> None:
    rng = np.random.default_rng(len(sizes) * 1000 + sum(sizes))
    assert_matches_naive(random_clouds(rng, sizes, norm=norm))


def test_threads_do_not_change_values() -> None:
    clouds = random_clouds(np.random.default_rng(2), [80, 120, 100, 100, 64, 140])
    assert np.array_equal(pairwise_w2(clouds, workers=1), pairwise_w2(clouds, workers=2))


def test_duplicate_points() -> None:
    a, b = [0.0, 0.0], [2.0, 2.0]
    # {a, a, b, b} and {a, b} are the same measure.
    assert w2(np.array([a, a, b, b]), np.array([a, b])) == 0.0
    # {a, a, a} vs {a, b}: half of the mass moves from a to b, W2^2 = |a - b|^2 / 2 = 4.
    assert w2(np.array([a, a, a]), np.array([a, b])) == pytest.approx(2.0, rel=1e-12)
    rng = np.random.default_rng(3)
    base = random_clouds(rng, [6, 9, 4], norm=300.0)
    clouds = [np.repeat(base[0], 2, axis=0), base[1], np.concatenate([base[2], base[2][:2]]), base[0][::2]]
    assert_matches_naive(clouds)
    # Each point twice is the same measure: 0 up to the rounding of the cost block.
    assert w2(np.repeat(base[0], 2, axis=0), base[0]) <= 1e-6 * w2(base[0], base[1])


def test_float32_inputs_are_accepted() -> None:
    clouds = random_clouds(np.random.default_rng(4), [10, 14, 10, 3], norm=300.0)
    c32 = [c.astype(np.float32) for c in clouds]
    d32 = pairwise_w2(c32)
    d64 = pairwise_w2([c.astype(np.float64) for c in c32])
    assert d32.dtype == np.float64
    assert np.array_equal(d32, d64)
    assert_matches_naive(c32)


def test_bad_shapes_raise() -> None:
    with pytest.raises(BBWDError, match="dimension"):
        pairwise_w2([np.zeros((3, 2)), np.zeros((3, 4))])
    with pytest.raises(BBWDError, match="non-empty"):
        pairwise_w2([np.zeros((3, 2)), np.zeros((0, 2))])


def test_large_translations_reduced_paths() -> None:
    # A measure and its translate by t are |t| apart in W2. Blocks of 80 x 80 and 120 x 60 points
    # take the reduced-cost assignment and network-simplex paths on the thread pool.
    rng = np.random.default_rng(5)
    x = rng.normal(size=(80, 16)) * 3.0
    t = np.full(16, 0.25)  # |t| = 1
    d = pairwise_w2([x, (x + t)[rng.permutation(80)]])
    assert d[0, 1] == pytest.approx(1.0, rel=1e-9)
    z = x[:60]
    d = pairwise_w2([np.concatenate([z, z])[rng.permutation(120)], z + t, z + 2 * t])
    # {z, z} is the measure on z: distances |t|, 2|t| and |t|.
    assert d[0, 1] == pytest.approx(1.0, rel=1e-9)
    assert d[0, 2] == pytest.approx(2.0, rel=1e-9)
    assert d[1, 2] == pytest.approx(1.0, rel=1e-9)


def test_cpu_threads_follow_omp_num_threads(monkeypatch):
    """A Ray task's OMP_NUM_THREADS (its CPUs) caps exact OT's pair pool and llama.cpp's threads; unset or not a
    number, the CPUs decide."""
    import os

    from blackbox_wd.clients import llamacpp
    from blackbox_wd.cpus import cpu_threads
    from blackbox_wd.measure import transport

    assert transport.cpu_threads is llamacpp.cpu_threads is cpu_threads  # both pools follow the one rule
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert cpu_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", str(cpus + 5))
    assert cpu_threads() == cpus
    for bad in ("four", "0", ""):
        monkeypatch.setenv("OMP_NUM_THREADS", bad)
        assert cpu_threads() == cpus
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert cpu_threads() == cpus


def test_w2_to_each_hand_computed():
    # x = {(0,0), (2,0)}; to {(1,0)}: every point moves 1 -> W2 = 1. To {(0,0),(2,0)}: 0.
    # To {(0,3),(2,3)}: each point moves 3 straight up -> W2 = 3. To {(0,0),(0,2),(2,0),(2,2)}
    # (half the mass stays, half moves 2) -> W2^2 = 0.5 * 4 = 2.
    from blackbox_wd.measure.transport import w2_to_each

    x = np.array([[0.0, 0.0], [2.0, 0.0]])
    clouds = [
        np.array([[1.0, 0.0]]),
        x.copy(),
        np.array([[0.0, 3.0], [2.0, 3.0]]),
        np.array([[0.0, 0.0], [0.0, 2.0], [2.0, 0.0], [2.0, 2.0]]),
    ]
    np.testing.assert_allclose(w2_to_each(x, clouds), [1.0, 0.0, 3.0, np.sqrt(2.0)], rtol=1e-12, atol=1e-12)


def test_w2_to_each_equals_the_first_row_of_pairwise_w2():
    from blackbox_wd.measure.transport import w2_to_each

    rng = np.random.default_rng(7)
    clouds = random_clouds(rng, [40, 55, 40, 80, 64])
    got = w2_to_each(clouds[0], clouds[1:])
    ref = naive_pairwise(clouds)[0, 1:]
    np.testing.assert_allclose(got, ref, rtol=1e-9)


def test_token_costs_equal_sizes_follow_the_permutation():
    # x1=(0,0), x2=(10,0); y1=(1,0), y2=(10,2): C = [[1, 104], [81, 4]]. The identity matching costs 1 + 4,
    # the swap 104 + 81, so x1 pays 1 and x2 pays 4 whatever the order of y; their mean 2.5 is EMD2.
    from blackbox_wd.measure.transport import token_costs_to_each, w2_from_token_costs

    x = np.array([[0.0, 0.0], [10.0, 0.0]])
    y = np.array([[1.0, 0.0], [10.0, 2.0]])
    costs = token_costs_to_each(x, [y, y[::-1]])
    np.testing.assert_allclose(costs, [[1.0, 4.0], [1.0, 4.0]], rtol=1e-12)
    np.testing.assert_allclose(w2_from_token_costs(costs), [np.sqrt(2.5)] * 2, rtol=1e-12)


def test_token_costs_unequal_sizes_follow_the_split_plan():
    # x = (0,0), (6,0) with mass 1/2 each; y = (0,1), (1,1), (6,1) with mass 1/3 each. Every cost is
    # (horizontal gap)^2 + 1 and the horizontal part is a 1-d problem with a strictly convex cost, so
    # the monotone plan is the one optimum: (0,0) -> (0,1): 1/3 at cost 1, (0,0) -> (1,1): 1/6 at 2,
    # (6,0) -> (1,1): 1/6 at 26, (6,0) -> (6,1): 1/3 at 1. With m = 2 points in x:
    #   c_1 = 2 (1/3 * 1 + 1/6 * 2) = 4/3,  c_2 = 2 (1/6 * 26 + 1/3 * 1) = 28/3,
    # whose mean 16/3 is EMD2 = 1/3 + 2/6 + 26/6 + 1/3.
    # From y's side (m = 3): (0,1) pays 3 (1/3 * 1) = 1, (1,1) pays 3 (1/6 * 2 + 1/6 * 26) = 14, (6,1) pays 1.
    from blackbox_wd.measure.transport import token_costs_to_each

    x = np.array([[0.0, 0.0], [6.0, 0.0]])
    y = np.array([[0.0, 1.0], [1.0, 1.0], [6.0, 1.0]])
    np.testing.assert_allclose(token_costs_to_each(x, [y]), [[4 / 3, 28 / 3]], rtol=1e-12)
    np.testing.assert_allclose(token_costs_to_each(y, [x]), [[1.0, 14.0, 1.0]], rtol=1e-12)
    assert token_costs_to_each(x, [y]).mean() == pytest.approx(16 / 3, rel=1e-12)


def test_token_costs_single_points_and_identical_clouds():
    from blackbox_wd.measure.transport import token_costs_to_each

    x = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
    # one point against x: it spreads its mass evenly, (0 + 4 + 9) / 3; x against one point: each its own cost
    np.testing.assert_allclose(token_costs_to_each(x[:1], [x]), [[13 / 3]], rtol=1e-12)
    np.testing.assert_allclose(token_costs_to_each(x, [x[:1]]), [[0.0, 4.0, 9.0]], rtol=1e-12, atol=1e-12)
    costs = token_costs_to_each(x, [x.copy(), x + 1.0])
    assert np.array_equal(costs[0], np.zeros(3))  # the same measure: no solve, exactly 0
    np.testing.assert_allclose(costs[1], [2.0, 2.0, 2.0], rtol=1e-12)  # every point moves by (1, 1)
    assert token_costs_to_each(x, []).shape == (0, 3)


@pytest.mark.parametrize("sizes", [[80, 55, 40, 80, 64, 1], [70] * 5, [3, 9, 2, 3]])
def test_token_cost_rows_average_to_emd2(sizes):
    """Mixed and equal sizes, small (one Gram matrix, serial) and large (threads, reduced costs)."""
    from blackbox_wd.measure.transport import token_costs_to_each, w2_from_token_costs, w2_to_each

    clouds = random_clouds(np.random.default_rng(sum(sizes)), sizes)
    costs = token_costs_to_each(clouds[0], clouds[1:])
    assert costs.shape == (len(sizes) - 1, sizes[0]) and np.all(costs >= 0)
    x = clouds[0]
    for row, y in zip(costs, clouds[1:], strict=True):
        a, b = np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y))
        ref = ot.emd2(a, b, ot.dist(x, y, metric="sqeuclidean"), numItermax=10_000_000)
        assert row.mean() == pytest.approx(ref, rel=1e-9)
    np.testing.assert_allclose(w2_from_token_costs(costs), w2_to_each(x, clouds[1:]), rtol=1e-9)
    assert np.array_equal(token_costs_to_each(x, clouds[1:], workers=1), token_costs_to_each(x, clouds[1:], workers=2))


def test_replicated_assignment_gives_the_hand_computed_plans():
    """The assignment of copies (``_replicated``, used while POT is not loaded) on the hand-computed cases above: the
    split plan's value 16/3 and the rows' costs 4/3, 28/3 (and from y's side 1, 14, 1); one point against two, 5."""
    from blackbox_wd.measure.transport import _replicated

    x = np.array([[0.0, 0.0], [6.0, 0.0]])
    y = np.array([[0.0, 1.0], [1.0, 1.0], [6.0, 1.0]])
    cost = ot.dist(x, y, metric="sqeuclidean")
    value, rows = _replicated(cost, cost)
    assert value == pytest.approx(16 / 3, rel=1e-12)
    np.testing.assert_allclose(rows, [4 / 3, 28 / 3], rtol=1e-12)
    value, rows = _replicated(cost.T.copy(), cost.T.copy())
    assert value == pytest.approx(16 / 3, rel=1e-12)
    np.testing.assert_allclose(rows, [1.0, 14.0, 1.0], rtol=1e-12)
    assert _replicated(np.array([[1.0, 9.0]]), np.array([[1.0, 9.0]]))[0] == pytest.approx(5.0, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_replicated_assignment_equals_the_network_simplex(seed):
    """Random unequal pairs up to a common size of 256, some sharing points (ties): the value and each row's cost
    of POT's plan, on the reduced cost block as the solver sees it."""
    from blackbox_wd.measure.transport import REPLICATE_MAX, _replicated, _solver_cost

    rng = np.random.default_rng(seed)
    done = 0
    while done < 20:
        n, m = (int(v) for v in rng.integers(2, 40, size=2))
        if n == m or np.lcm(n, m) > REPLICATE_MAX:
            continue
        x, y = rng.normal(size=(n, 16)), rng.normal(size=(m, 16)) * rng.uniform(0.5, 2)
        y[: min(n, m) // 2] = x[: min(n, m) // 2]
        cost = ot.dist(x, y, metric="sqeuclidean")
        a, b = np.full(n, 1 / n), np.full(m, 1 / m)
        plan = ot.emd(a, b, cost, numItermax=10_000_000)
        value, rows = _replicated(cost, _solver_cost(cost)[0])
        assert value == pytest.approx(float(np.vdot(plan, cost)), rel=1e-12)
        np.testing.assert_allclose(rows, np.einsum("ij,ij->i", plan, cost) / a, rtol=1e-9, atol=1e-12)
        done += 1


def test_a_one_prompt_run_solves_small_pairs_by_assignment_without_pot(tmp_path):
    """``replicate=REPLICATE_MAX`` (a one-prompt run's): in a new process, small clouds of unequal sizes are 0-256
    apart in common size, so no POT is imported (its import takes torch's), and the matrix is POT's to 1e-12."""
    import json
    import subprocess
    import sys

    clouds = random_clouds(np.random.default_rng(3), [7, 9, 8, 12, 10, 7])
    np.savez(tmp_path / "clouds.npz", *clouds)
    script = (
        "import json, sys, numpy as np\n"
        "from blackbox_wd.measure.transport import REPLICATE_MAX, pairwise_w2\n"
        f"f = np.load({str(tmp_path / 'clouds.npz')!r})\n"
        "clouds = [f[k] for k in sorted(f.files, key=lambda k: int(k.split('_')[1]))]\n"
        "d = pairwise_w2(clouds, replicate=REPLICATE_MAX)\n"
        "print(json.dumps({'d': d.tolist(), 'ot': 'ot' in sys.modules}))"
    )
    out = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout)
    assert out["ot"] is False
    np.testing.assert_allclose(out["d"], pairwise_w2(clouds), rtol=1e-12)
