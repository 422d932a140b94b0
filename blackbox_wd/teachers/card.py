"""A teacher without its weights: tokenizer, chat template, context length and layer.

What a process needs to check prompts and name the settings before (or instead of) loading a model:
the Ray engine's driver computes the fingerprint from it and its sampling actors check each prompt
against the teacher's template and context before any API call, while only the teacher actors
load the weights. :class:`~blackbox_wd.teachers.hf.HFTeacher` uses the same two functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jinja2 import TemplateError
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase

from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.records import Messages
from blackbox_wd.teachers.embedded import ensure_hf_folder
from blackbox_wd.teachers.projection import PROJ_DIM, PROJ_SEED
from blackbox_wd.teachers.registry import EMBEDDED_MODELS, ModelSpec, resolve


def chat_prompt_ids(tokenizer: PreTrainedTokenizerBase, messages: Messages) -> list[int]:
    """Token ids of the prompt up to where the assistant's answer starts (BBWDError if the template rejects it)."""
    if tokenizer.chat_template:
        try:
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                                 enable_thinking=False)
        except TemplateError as exc:  # e.g. roles that do not alternate, no user turn
            raise BBWDError(f"the teacher's chat template rejects these messages: {one_line(exc)}") from None
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    text = "\n\n".join(m["content"] for m in messages) + "\n"
    return tokenizer(text, add_special_tokens=True)["input_ids"]


def resolve_layer(n_layers: int, layer: int | None) -> int:
    """The layer whose states are kept: floor(L / 2) unless given; BBWDError when out of range."""
    out = n_layers // 2 if layer is None else int(layer)
    if not 1 <= out <= n_layers:
        raise BBWDError(f"layer {out} out of range: the teacher has layers 1..{n_layers}")
    return out


def model_source(spec: ModelSpec) -> tuple[str, dict[str, str]]:
    """The folder or hub id that ``from_pretrained`` loads a model spec from, and its GGUF keyword."""
    if spec.kind == "gguf":
        path = Path(spec.source)
        return str(path.parent), {"gguf_file": path.name}
    if spec.kind == "embedded":
        return str(ensure_hf_folder(EMBEDDED_MODELS[spec.source])), {}
    return spec.source, {}


@dataclass(frozen=True)
class TeacherCard:
    """A teacher's tokenizer, context and resolved layer, loaded without its weights."""

    name: str
    tokenizer: PreTrainedTokenizerBase
    n_layers: int
    layer: int
    max_length: int | None
    proj_dim: int = PROJ_DIM
    proj_seed: int = PROJ_SEED

    def prompt_ids(self, messages: Messages) -> list[int]:
        """Token ids of the chat-templated prompt, as the teacher reads it."""
        return chat_prompt_ids(self.tokenizer, messages)


def load_card(name: str, layer: int | None = None) -> TeacherCard:
    """The card of a registry name, hub id, folder or GGUF file (tokenizer and config only)."""
    spec = resolve(name)
    source, extra = model_source(spec)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **extra)
        config = AutoConfig.from_pretrained(source, **extra).get_text_config()
    except OSError as exc:  # hub unreachable, gated repo, missing files
        raise BBWDError(f"could not load model '{spec.name}' from {spec.source}: {str(exc).splitlines()[0]}") from exc
    n_layers = int(config.num_hidden_layers)
    return TeacherCard(name, tokenizer, n_layers, resolve_layer(n_layers, layer),
                       getattr(config, "max_position_embeddings", None))
