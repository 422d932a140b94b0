"""The checks on values read from settings and users' files, one rule each, shared by every reader."""

from __future__ import annotations

import math
from typing import TypeGuard


def is_finite_number(value: object) -> TypeGuard[float]:
    """True for an int or a float that is neither NaN nor infinite; False for a bool and anything else.

    Parameters
    ----------
    value : object
        A value as read (JSON, a setting, a CLI option).

    Returns
    -------
    ok : bool
        Whether ``value`` is a finite real number (and, for type checkers, a float from here on).

    Examples
    --------
    >>> [is_finite_number(v) for v in (1, 2.5, True, float("nan"), float("inf"), "3", None)]
    [True, True, False, False, False, False, False]
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_whole_number(value: object) -> TypeGuard[int]:
    """True for an int that is not a bool (JSON's true is not a count).

    Parameters
    ----------
    value : object
        A value as read.

    Returns
    -------
    ok : bool
        Whether ``value`` is an int other than True and False.

    Examples
    --------
    >>> [is_whole_number(v) for v in (3, -1, True, 3.0, "3")]
    [True, True, False, False, False]
    """
    return isinstance(value, int) and not isinstance(value, bool)
