"""MATH answer extraction, normalisation and equivalence on hand-written pairs."""

from __future__ import annotations

import pytest
import sympy

from blackbox_wd.eval.mathnorm import extract_answer, is_equiv, last_boxed, latex_to_sympy, math_correct, normalize

EQUIVALENT = [
    (r"\left( 3, \frac{\pi}{2} \right)", r"(3,\frac{\pi}{2})"),  # \left \right, spaces
    (r"\dfrac{14}{3}", r"\frac{14}{3}"),                          # dfrac -> frac
    (r"\frac12", "0.5"),                                           # \frac12 and sympy
    (r"\sqrt2/2", r"\frac{\sqrt{2}}{2}"),                          # \sqrt2, a/b
    (r"30^\circ", "30"),                                           # degrees
    (r"10\text{ cm}", "10"),                                       # \text{ units}
    (r"\text{(C)}", "C"),                                          # multiple choice
    ("x = 5", "5"),                                                # leading "x ="
    ("1,000", "1000"),                                             # thousands separator
    (r"50\%", "50"),                                               # percent
    (r"\$18.90", "18.9"),                                          # dollars, trailing zero
    ("7.", "7"),                                                   # trailing period
    ("2x+1", "1+2x"),                                              # sympy: commutativity
    ("x^2+2x+1", "(x+1)^2"),                                       # sympy: expansion
    (r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt{3}}"),                # sympy: rationalised
    (r"\pi r^2", r"r^2\pi"),                                       # \pi followed by a letter
    ("3+4i", "4i+3"),                                              # imaginary unit
    (r"2, 1", "1,2"),                                              # bare solution lists: unordered
    (r"1\pm\sqrt{19}", r"1-\sqrt{19}, 1+\sqrt{19}"),               # \pm expands
    (r"x \in [-2, 7]", "[-2,7]"),                                  # "x \in" dropped
]

NOT_EQUIVALENT = [
    (r"\frac{1}{3}", "0.333"),           # not within 1e-6
    ("[1,2)", "[1,2]"),                  # interval ends differ
    ("(1,2)", "(2,1)"),                  # ordered pairs keep their order
    ("2x+1", "2x-1"),
    (r"\sqrt{2}", r"\sqrt{3}"),
    ("(3,4)", "(3,4,5)"),
    (r"\text{Evelyn}", r"\text{Navin}"),
    ("-5", "5"),
]


@pytest.mark.parametrize(("a", "b"), EQUIVALENT)
def test_equivalent_pairs(a, b):
    assert is_equiv(a, b)
    assert is_equiv(b, a)


@pytest.mark.parametrize(("a", "b"), NOT_EQUIVALENT)
def test_not_equivalent_pairs(a, b):
    assert not is_equiv(a, b)
    assert not is_equiv(b, a)


def test_normalize_examples():
    assert normalize(r"\left( 3, \dfrac{\pi}{2} \right)") == r"(3,\frac{\pi}{2})"
    assert normalize(r"\boxed{\frac 12}") == r"\frac{1}{2}"
    assert normalize(r"x = \$1,000.") == "1000"
    assert normalize(".5") == "0.5"


def test_last_boxed_balanced_braces():
    text = r"First \boxed{2}. Then $\boxed{\frac{1}{\sqrt{2}}}$ is the answer."
    assert last_boxed(text) == r"\frac{1}{\sqrt{2}}"
    assert last_boxed(r"so \boxed 5$") == "5"
    assert last_boxed(r"unbalanced \boxed{\frac{1}{2}") is None
    assert last_boxed("no box here") is None


def test_extract_answer_falls_back_to_last_number():
    assert extract_answer("We get 3 apples, then 1,250.5 in total.") == "1250.5"
    assert extract_answer("The ratio is 3/4") == "3/4"
    assert extract_answer("I don't know") is None
    assert extract_answer(r"12 then \boxed{x^2}") == "x^2"


def test_math_correct():
    answers = [r"\frac{14}{3}"]
    assert math_correct(r"Adding, we get $\boxed{\dfrac{14}{3}}$.", answers)
    assert math_correct("So the answer is 14/3", answers)
    assert not math_correct(r"$\boxed{\frac{3}{14}}$", answers)
    assert not math_correct("no idea", answers)


def test_latex_to_sympy_refuses_unsafe_or_huge_input():
    assert latex_to_sympy("__import__('os')") is None
    assert latex_to_sympy("9^{9^{9}}") is None
    assert latex_to_sympy(r"\unknowncommand{1}") is None
    assert latex_to_sympy(r"\frac{1}{2}") == sympy.Rational(1, 2)
    assert latex_to_sympy(r"2\sqrt{2}") == 2 * sympy.sqrt(2)
    assert float(latex_to_sympy(r"\frac{\sqrt{4}}{2}")) == pytest.approx(1.0)
