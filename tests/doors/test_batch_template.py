"""A record whose messages the teacher's chat template rejects is that record's error, not the batch's end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Llama-2's rule, as its template (and Gemma's, Qwen's) enforces it with raise_exception
ALTERNATE = (
    "{% if messages[0]['role'] == 'system' %}{% set rest = messages[1:] %}{% else %}{% set rest = messages %}"
    "{% endif %}{% for m in rest %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "<{{ m['role'] }}> {{ m['content'] }} <end> {% endfor %}"
    "{% if add_generation_prompt %}<assistant> {% endif %}"
)


@pytest.fixture(scope="module")
def strict_folder(tiny_llama, tmp_path_factory):
    """The tiny Llama saved as a model folder whose chat template rejects non-alternating roles."""
    model, tok = tiny_llama
    folder = tmp_path_factory.mktemp("strict-template")
    original, tok.chat_template = tok.chat_template, ALTERNATE  # the fixture is shared: put it back after
    try:
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    finally:
        tok.chat_template = original
    return folder


RECORDS = [
    {"id": "ok", "prompt": "what is the capital of france", "responses": ["paris", "rome"]},
    {
        "id": "starts-with-assistant",
        "messages": [{"role": "assistant", "content": "paris"}, {"role": "user", "content": "what is it"}],
        "responses": ["paris", "rome"],
    },
    {
        "id": "two-users",
        "messages": [{"role": "user", "content": "what"}, {"role": "user", "content": "is it"}],
        "responses": ["paris", "rome"],
    },
    {
        "id": "system-then-user",
        "messages": [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}],
        "responses": ["yes", "no"],
    },
]


@pytest.mark.parametrize("sampled", [False, True])
def test_template_rejection_is_the_records_error(strict_folder, tmp_path, sampled):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    records = [{k: v for k, v in r.items() if k != "responses" or not sampled} for r in RECORDS]
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    extra = ["--target", str(strict_folder), "-k", "2", "--max-tokens", "4"] if sampled else []
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "blackbox_wd",
            "batch",
            str(src),
            "-o",
            str(dst),
            "--teacher",
            str(strict_folder),
            "--device",
            "cpu",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in dst.read_text().splitlines()]
    rejected = (
        "field 'messages': the teacher's chat template rejects these messages: Conversation roles must "
        "alternate user/assistant/user/assistant/..."
    )
    assert [r["error"] for r in rows] == [None, f"line 2: {rejected}", f"line 3: {rejected}", None]
    assert rows[0]["avg_wd"] is not None and rows[3]["avg_wd"] is not None
