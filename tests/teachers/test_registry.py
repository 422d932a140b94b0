"""Teacher names resolve to the embedded model, hub ids, folders or GGUF files."""

import pytest

from blackbox_wd.errors import BBWDError
from blackbox_wd.teachers.registry import resolve


@pytest.mark.parametrize(
    "name,source,kind",
    [
        ("smollm2-135m", "smollm2-135m", "embedded"),
        ("llama-2-7b", "meta-llama/Llama-2-7b-chat-hf", "hub"),
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", "hub"),
        ("qwen3-8b", "Qwen/Qwen3-8B", "hub"),
        ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", "hub"),
    ],
)
def test_known_names(name, source, kind):
    spec = resolve(name)
    assert (spec.source, spec.kind) == (source, kind)


def test_local_folder_and_gguf(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert resolve(str(tmp_path)).kind == "folder"
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    assert resolve(str(f)).kind == "gguf"
    with pytest.raises(BBWDError, match="model folder has no config.json"):
        resolve(str(tmp_path.parent))


def test_unknown_name():
    with pytest.raises(BBWDError, match="unknown teacher 'llama-9'"):
        resolve("llama-9")
