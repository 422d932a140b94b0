"""Teachers: open models that teacher-force responses and return their mid-layer token states."""

from blackbox_wd.teachers.hf import HFTeacher, load_teacher
from blackbox_wd.teachers.registry import ModelSpec, resolve

__all__ = ["HFTeacher", "ModelSpec", "load_teacher", "resolve"]
