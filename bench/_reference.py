"""The teacher pass as it was before responses ran in runs of similar length (#24), kept as
``bench/speed/teacher_cpu.py``'s reference.

``PaddedTeacher``: all of a prompt chunk's responses right-padded together, one pass per token budget.
"""

from __future__ import annotations

from blackbox_wd.teachers.hf import HFTeacher


class PaddedTeacher(HFTeacher):
    """HFTeacher whose responses run padded to the longest of their budget-sized chunk (before length runs)."""

    def _runs(self, lengths: list[int], extra: int) -> list[list[int]]:
        """As many rows per pass as the token budget holds."""
        return self._chunks(lengths, extra)
