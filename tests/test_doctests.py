"""The package's docstring examples run: every module of blackbox_wd with a ``>>>`` example passes
``doctest`` with at least one example tried."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "blackbox_wd"


def modules_with_examples() -> list[str]:
    """Dotted names of the package's modules whose source has a ``>>>`` line (found without importing)."""
    return sorted(
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for path in PACKAGE.rglob("*.py")
        if any(line.lstrip().startswith(">>>") for line in path.read_text(encoding="utf-8").splitlines())
    )


def test_examples_are_found() -> None:
    assert {"blackbox_wd.checks", "blackbox_wd.measure.wd", "blackbox_wd.measure.transport"} <= set(
        modules_with_examples()
    )


@pytest.mark.parametrize("name", modules_with_examples())
def test_module_examples_pass(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0, f"{name}: {result.failed} of {result.attempted} failed"
