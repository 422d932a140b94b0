"""MATH answers with math-verify: the hand-written equivalence pairs, extraction, and its timeouts."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from blackbox_wd.signals.answers.mathcheck import has_boxed, math_correct, parse_response, same_final_answer

EQUIVALENT = [
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})"),  # \left \right, spaces
    (r"\dfrac{14}{3}", r"\frac{14}{3}"),  # dfrac -> frac
    (r"\frac12", "0.5"),  # \frac12 and numbers
    (r"\sqrt2/2", r"\frac{\sqrt{2}}{2}"),  # \sqrt2, a/b
    (r"30^\circ", "30"),  # degrees
    (r"10\text{ cm}", "10"),  # \text{ units}
    (r"\text{(C)}", "C"),  # multiple choice
    ("x = 5", "5"),  # leading "x ="
    ("1,000", "1000"),  # thousands separator
    (r"50\%", "50"),  # percent
    (r"\$18.90", "18.9"),  # dollars, trailing zero
    ("2x+1", "1+2x"),  # commutativity
    ("x^2+2x+1", "(x+1)^2"),  # expansion
    (r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt{3}}"),  # rationalised
    (r"\pi r^2", r"r^2\pi"),  # \pi followed by a letter
    ("3+4i", "4i+3"),  # imaginary unit
    (r"2, 1", "1,2"),  # bare solution lists: unordered
    (r"1\pm\sqrt{19}", r"1-\sqrt{19}, 1+\sqrt{19}"),  # \pm expands
    (r"x \in [-2, 7]", "[-2,7]"),  # "x \in" dropped
]

NOT_EQUIVALENT = [
    (r"\frac{1}{3}", "0.333"),  # not within 6 decimals
    ("[1,2)", "[1,2]"),  # interval ends differ
    ("(1,2)", "(2,1)"),  # ordered pairs keep their order
    ("2x+1", "2x-1"),
    (r"\sqrt{2}", r"\sqrt{3}"),
    ("(3,4)", "(3,4,5)"),
    (r"\text{Evelyn}", r"\text{Navin}"),
    ("-5", "5"),
]


@pytest.mark.parametrize(("a", "b"), EQUIVALENT)
def test_equivalent_pairs(a, b):
    assert math_correct(f"so $\\boxed{{{a}}}$", [b])
    assert math_correct(f"so $\\boxed{{{b}}}$", [a])


@pytest.mark.parametrize(("a", "b"), NOT_EQUIVALENT)
def test_not_equivalent_pairs(a, b):
    assert not math_correct(f"so $\\boxed{{{a}}}$", [b])
    assert not math_correct(f"so $\\boxed{{{b}}}$", [a])


def test_where_math_verify_and_the_old_normaliser_disagree():
    # old eval/mathnorm.py: "7." and "7" equivalent. math-verify keeps a boxed "7." a string;
    # the same answer unboxed at the end of a sentence parses as 7.
    assert not math_correct(r"so $\boxed{7.}$", ["7"])
    assert math_correct("so the answer is 7.", ["7"])
    # old: an unclosed box has no answer; math-verify reads what the box holds so far
    assert parse_response(r"cut off \boxed{\frac{1}{2}")[0] == parse_response(r"\boxed{0.5}")[0]


def test_math_correct_on_solutions():
    answers = [r"\frac{14}{3}"]
    assert math_correct(r"Adding, we get $\boxed{\dfrac{14}{3}}$.", answers)
    assert math_correct("So the answer is 14/3", answers)  # no box: the plain expression
    assert not math_correct(r"$\boxed{\frac{3}{14}}$", answers)
    assert not math_correct("no idea", answers)
    assert math_correct(r"$\boxed{3}$", ["1", "3"])  # any reference


def test_the_last_box_is_the_answer():
    assert parse_response(r"First \boxed{2}. Then $\boxed{\frac{1}{\sqrt{2}}}$ is it.")[1] == r"\frac{1}{\sqrt{2}}"
    assert parse_response(r"12 then \boxed{x^2}")[1] == "x^2"
    assert parse_response("I don't know") == ()


def test_same_final_answer_for_dse():
    assert same_final_answer(r"so x = \boxed{\frac{1}{2}}", r"hence \boxed{0.5}")
    assert not same_final_answer(r"so x = \boxed{\frac{1}{2}}", r"the answer is \boxed{2}")
    assert same_final_answer("I am not sure", " I am not sure ")  # no answer: equal strings only
    assert not same_final_answer("I am not sure", r"\boxed{2}")


def test_has_boxed():
    assert has_boxed(r"so \boxed{2}") and has_boxed(r"\fbox{3}") and not has_boxed("the answer is 2")


def test_a_huge_factorial_returns_within_the_timeout():
    # The old normaliser evaluated 10000000! (a hang); math-verify gives up after its timeout.
    t0 = time.perf_counter()
    assert not math_correct(r"so $\boxed{10000000!}$", ["5"])
    assert time.perf_counter() - t0 < 15


def test_a_worker_thread_gets_timeouts_too():
    # SIGALRM works in the main thread only: other threads check in a worker process.
    t0 = time.perf_counter()
    with ThreadPoolExecutor(1) as pool:
        huge = pool.submit(math_correct, r"so $\boxed{10000000!}$", ["5"])
        right = pool.submit(math_correct, r"$\boxed{\dfrac{14}{3}}$", [r"\frac{14}{3}"])
        same = pool.submit(same_final_answer, r"\boxed{0.5}", r"\boxed{\frac12}")
        assert (huge.result(), right.result(), same.result()) == (False, True, True)
    assert time.perf_counter() - t0 < 60
