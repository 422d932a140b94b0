"""The `bbwd` command line: parses options and delegates; errors become one line, exit code 2.

``app`` (the typer app, the shared options and ``main``, the entry point) and one module per command, its options
beside it: ``score``, ``batch`` (and ``rejudge``'s rows), ``eval``, ``calibrate``, ``report``, ``serve``.
"""

# isort: off
from blackbox_wd.doors.cli.app import app, main
from blackbox_wd.doors.cli import score, batch, eval, calibrate, report, serve  # the commands, in `bbwd --help`'s order

# isort: on

__all__ = ["app", "batch", "calibrate", "eval", "main", "report", "score", "serve"]
