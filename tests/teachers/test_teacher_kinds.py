"""A name becomes a ready teacher in one pass (``hf.ready_teacher``), and a new teacher kind is one function that
makes its files present plus its line in ``files.TEACHER_KINDS`` (docs/layout.md, "A new teacher kind")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.errors import BBWDError
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.card import TeacherCard
from blackbox_wd.teachers.files import TEACHER_KINDS, ModelFiles, present
from blackbox_wd.teachers.forcing import HFTeacher
from blackbox_wd.teachers.hf import placement, ready_teacher
from blackbox_wd.teachers.registry import ModelSpec, resolve

MESSAGES = [{"role": "user", "content": "what is the capital of france"}]
RESPONSES = ["paris is the capital", "it is rome"]


def test_every_kind_the_registry_names_has_its_line(tmp_path):
    """``registry.resolve``'s kinds are the keys of ``files.TEACHER_KINDS``; a spec of no kind fails in one line."""
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    names = ["smollm2-135m", "llama-2-7b", "org/name", str(tmp_path), str(tmp_path / "m.gguf")]
    assert {resolve(name).kind for name in names} == set(TEACHER_KINDS)
    with pytest.raises(BBWDError, match="no teacher kind 'awq' for 'x': the kinds are embedded, hub, folder, gguf"):
        present(ModelSpec("x", "x", "awq"))


def test_a_new_kind_is_one_function_and_one_registry_line(monkeypatch, tiny_llama, tmp_path):
    """A fake kind, added as docs/layout.md says (its function, its line in TEACHER_KINDS), takes the one path: its
    files made present once, its weights in the placement's dtype on its device, the teacher's layer and projection;
    and, without a placement, its card."""
    model, tok = tiny_llama
    made: list[Path] = []

    def tiny_files(spec: ModelSpec) -> ModelFiles:
        """The fake kind: a tiny random Llama, saved into the folder ``spec.source`` on first use."""
        folder = Path(spec.source)
        if not (folder / "config.json").exists():
            model.save_pretrained(folder)
            tok.save_pretrained(folder)
            made.append(folder)
        return ModelFiles(spec, str(folder))

    monkeypatch.setitem(TEACHER_KINDS, "tiny", tiny_files)
    spec = ModelSpec("tiny-fake", str(tmp_path / "tiny"), "tiny")

    teacher = ready_teacher(spec, placement("cpu", "float32"))
    assert isinstance(teacher, HFTeacher) and teacher.name == "tiny-fake"
    assert (teacher.n_layers, teacher.layer, str(teacher.device), teacher.model.dtype) == (4, 2, "cpu", torch.float32)
    assert not teacher.model.training
    direct = HFTeacher(model, tok, name="tiny")
    for got, want in zip(teacher.encode(MESSAGES, RESPONSES), direct.encode(MESSAGES, RESPONSES), strict=True):
        np.testing.assert_allclose(got.states, want.states, rtol=1e-5, atol=1e-6)

    card = ready_teacher(spec, None, layer=3)
    assert isinstance(card, TeacherCard) and (card.name, card.n_layers, card.layer, card.max_length) == (
        "tiny-fake",
        4,
        3,
        64,
    )
    assert card.prompt_ids(MESSAGES) == teacher.prompt_ids(MESSAGES)
    assert made == [tmp_path / "tiny"]  # present once, found present the second time


def test_another_local_target_is_loaded_in_the_teachers_placement(tiny_llama, tiny_folder, tmp_path):
    """The target's model, another local one, is loaded by the same path with the placement chosen for the teacher
    (``hf.placement``, once); a folder, not a GGUF file, is drawn by transformers."""
    model, tok = tiny_llama
    target = tmp_path / "target"
    model.save_pretrained(target)
    tok.save_pretrained(target)
    settings = Settings(teacher=tiny_folder, target=str(target), device="cpu", dtype="float32", k=2, max_tokens=4)
    detector = Detector.from_settings(settings, None)
    sampler = detector.sampler
    assert isinstance(sampler, LocalSampler) and isinstance(detector.teacher, HFTeacher)
    drawn = sampler.teacher
    assert drawn is not detector.teacher and drawn.name == str(target)
    assert (
        (str(drawn.device), drawn.model.dtype)
        == (detector.device, detector.teacher.model.dtype)
        == ("cpu", torch.float32)
    )
    assert detector.reported_settings()["sampler"] == "transformers"
