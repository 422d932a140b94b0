"""A teacher without its weights: tokenizer, chat template, context length and layer.

What a process needs to check prompts and name the settings before (or instead of) loading a model:
the Ray engine's driver computes the fingerprint from it and its sampling actors check each prompt
against the teacher's template and context before any API call, while only the teacher actors
load the weights. :class:`~blackbox_wd.teachers.forcing.HFTeacher` reads text with the same :class:`TextReader`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
import transformers
from jinja2 import TemplateError
from tokenizers import Tokenizer, models

from blackbox_wd.errors import BBWDError, PromptTooLong, one_line
from blackbox_wd.records import JSONObject, Messages
from blackbox_wd.teachers.projection import PROJ_DIM, PROJ_SEED

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from blackbox_wd.teachers.files import ModelFiles


def plain_tokenizer(tokenizer: PreTrainedTokenizerBase) -> Tokenizer | None:
    """A copy of a fast tokenizer's backend that reads special-token strings as text (None for a slow tokenizer).

    A copy, because ``split_special_tokens=True`` sets a flag on the shared backend: a thread reading a
    chat template at the same time would lose its control tokens.
    """
    if not getattr(tokenizer, "is_fast", False):
        return None
    plain = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    plain.encode_special_tokens = True
    return plain


def lengthens_only(normalizer: JSONObject | None) -> bool:
    """Whether a tokenizer's normalizer (its JSON) never makes a text shorter: none, Prepend, or Replace of a
    string by one at least as long (SentencePiece's space to "\u2581"); Unicode forms, stripping and the rest may."""
    if normalizer is None:
        return True
    kind = normalizer.get("type")
    if kind == "Sequence":
        return all(lengthens_only(n) for n in normalizer.get("normalizers", []))
    if kind == "Replace":
        pattern = normalizer.get("pattern", {}).get("String")
        return pattern is not None and len(normalizer.get("content", "").encode()) >= len(pattern.encode())
    return kind == "Prepend"


def token_bytes(tokenizer: PreTrainedTokenizerBase) -> int | None:
    """The most bytes of text one token stands for; None when no such bound holds.

    It holds for BPE models that can spell every byte (byte-level, or byte fallback) behind a
    normalizer that never shortens text: a byte-level token stands for one byte per character of
    its vocabulary string, any other for at most the UTF-8 bytes of its string (a SentencePiece
    space is the 3-byte "\u2581"; a fallback byte "<0x41>"). A model with an unknown token
    (WordPiece, Unigram, word level) can cover any length with one token.
    """
    if not getattr(tokenizer, "is_fast", False):
        return None
    backend = tokenizer.backend_tokenizer
    byte_level = "ByteLevel" in repr(backend.pre_tokenizer)
    if not isinstance(backend.model, models.BPE) or not (byte_level or backend.model.byte_fallback):
        return None
    if not lengthens_only(json.loads(backend.to_str()).get("normalizer")):
        return None
    vocab = backend.get_vocab(with_added_tokens=False)
    added = [token.content for token in tokenizer.added_tokens_decoder.values()]
    return max(
        [len(t) if byte_level else len(t.encode("utf-8")) for t in vocab] + [len(t.encode("utf-8")) for t in added]
    )


@dataclass(frozen=True)
class TextReader:
    """How a teacher reads prompts and responses: user text always as text, never as control tokens.

    Only the control tokens a chat template writes itself become control tokens; ``<|im_end|>`` in a
    message or a response is spelled with ordinary tokens. Prompts are checked against the context,
    provably over-long ones before they are tokenized.
    """

    tokenizer: PreTrainedTokenizerBase
    max_length: int | None
    plain: Tokenizer | None
    token_bytes: int | None

    @classmethod
    def of(cls, tokenizer: PreTrainedTokenizerBase, max_length: int | None) -> TextReader:
        """The reader of a tokenizer (its plain copy and byte bound computed once)."""
        return cls(tokenizer, max_length, plain_tokenizer(tokenizer), token_bytes(tokenizer))

    def text_ids(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of text read as text (special-token strings split into ordinary tokens)."""
        valid_text(text, "a response")
        if self.plain is not None:
            return self.plain.encode(text, add_special_tokens=add_special_tokens).ids
        return self.tokenizer(text, add_special_tokens=add_special_tokens, split_special_tokens=True)["input_ids"]

    def text_offsets(self, text: str, ids: Sequence[int]) -> np.ndarray:
        """(len(ids), 2) character spans (start, end) of the tokens ``ids`` of ``text``.

        The plain tokenizer's offsets when it reads ``text`` as exactly ``ids``; else (a white-box answer's own
        ids, a slow tokenizer) each token ends where the decoded prefix up to it stops matching the text, and
        starts where the previous one ended (a token that adds no whole character gets an empty span).
        """
        if self.plain is not None:
            encoding = self.plain.encode(text, add_special_tokens=False)
            if encoding.ids == list(ids):
                return np.array(encoding.offsets, dtype=np.int64).reshape(-1, 2)
        # one sequence of ids decodes to one string
        stops = [
            _common_prefix(cast(str, self.tokenizer.decode(list(ids[: n + 1]), skip_special_tokens=True)), text)
            for n in range(len(ids))
        ]
        ends = np.maximum.accumulate(np.array(stops, dtype=np.int64)) if stops else np.zeros(0, dtype=np.int64)
        return np.stack([np.concatenate([[0], ends[:-1]]).astype(np.int64), ends], axis=1)

    def response_ids(self, response: str | Sequence[int]) -> list[int]:
        """Token ids of a response: its text tokenized alone, as text (no control tokens), no EOS; ids as given."""
        return self.text_ids(response) if isinstance(response, str) else [int(t) for t in response]

    def check(self, index: int, prompt: list[int], response: list[int], name: str | None = None) -> None:
        """Raise BBWDError when the prompt or response ``index`` (or ``name``d) is empty or they do not fit the
        context."""
        name = name or f"response {index}"
        if not prompt:
            raise BBWDError(f"prompt of {name} has no tokens")
        if not response:
            raise BBWDError(f"{name} is empty: no tokens to measure")
        if self.max_length and len(prompt) + len(response) > self.max_length:
            raise BBWDError(
                f"prompt+{name} has {len(prompt) + len(response)} tokens, "
                f"over the teacher's context of {self.max_length}"
            )

    def least_tokens(self, text: str) -> int:
        """A lower bound of the tokens of a text from its byte length alone (0 when no bound holds).

        A text of B bytes has at least B / token_bytes tokens, whatever it says (``token_bytes``);
        with a chat template, the text is its rendering.
        """
        if not self.token_bytes or not self.max_length or len(text) * 4 < self.token_bytes * self.max_length:
            return 0  # at most 4 bytes a character: not over the context by its length alone
        return len(text.encode("utf-8")) // self.token_bytes

    def prompt_ids(self, messages: Messages) -> list[int]:
        """Token ids of the prompt up to where the assistant's answer starts.

        BBWDError when the chat template rejects the messages, when they are not valid Unicode, or
        when the prompt fills the teacher's context (a response needs at least one more token); a
        prompt that is over it by its byte length alone is refused before it is tokenized.
        """
        text = self._render(messages)
        least = self.least_tokens(text)
        if self.max_length and least >= self.max_length:
            raise PromptTooLong(
                f"the prompt has at least {least} tokens ({len(text.encode('utf-8'))} bytes, at "
                f"most {self.token_bytes} a token), over the teacher's context of {self.max_length}"
            )
        ids = self._ids(messages, text)
        if self.max_length and len(ids) >= self.max_length:
            raise PromptTooLong(f"the prompt has {len(ids)} tokens, over the teacher's context of {self.max_length}")
        return ids

    def _ids(self, messages: Messages, text: str) -> list[int]:
        """The prompt's ids: the chat template's with its own control tokens only, else its text read as text."""
        if not self.tokenizer.chat_template:
            return self.text_ids(text, add_special_tokens=True)
        return self.chat_ids(messages)

    def chat_ids(self, messages: Messages, generation_prompt: bool = True) -> list[int]:
        """The chat template's token ids of the messages, with its own control tokens only; with
        ``generation_prompt`` False, as a finished conversation (no assistant turn opened after it).

        BBWDError when the messages spell a control token the tokenizer also reads from plain text; the
        template's own TemplateError passes.
        """
        try:
            return list(
                self.tokenizer.apply_chat_template(
                    list(messages),
                    add_generation_prompt=generation_prompt,
                    tokenize=True,
                    return_dict=False,
                    sanitize_control_tokens=True,
                    enable_thinking=False,
                )
            )
        except ValueError as exc:  # a control token the tokenizer also spells from plain text
            raise BBWDError(f"the teacher cannot read these messages as text: {one_line(exc)}") from None

    def _render(self, messages: Messages) -> str:
        """The prompt as text: the chat template's rendering, else the messages joined by blank lines."""
        if not self.tokenizer.chat_template:
            text = "\n\n".join(m["content"] for m in messages) + "\n"
        else:
            try:  # tokenize=False: the text
                text = cast(
                    str,
                    self.tokenizer.apply_chat_template(
                        messages, add_generation_prompt=True, tokenize=False, enable_thinking=False
                    ),
                )
            except TemplateError as exc:  # e.g. roles that do not alternate, no user turn
                raise BBWDError(f"the teacher's chat template rejects these messages: {one_line(exc)}") from None
        valid_text(text, "the prompt")
        return text


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of two strings."""
    if b.startswith(a):
        return len(a)
    n = min(len(a), len(b))
    differ = np.flatnonzero(
        np.frombuffer(a[:n].encode("utf-32-le"), np.uint32) != np.frombuffer(b[:n].encode("utf-32-le"), np.uint32)
    )
    return int(differ[0]) if differ.size else n


def valid_text(text: str, what: str) -> None:
    """Raise BBWDError when text is not valid Unicode (a lone surrogate, which no tokenizer takes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BBWDError(f"{what} is not valid Unicode (a lone surrogate at character {exc.start})") from None


def resolve_layer(n_layers: int, layer: int | None) -> int:
    """The layer whose states are kept: floor(L / 2) unless given; BBWDError when out of range."""
    out = n_layers // 2 if layer is None else int(layer)
    if not 1 <= out <= n_layers:
        raise BBWDError(f"layer {out} out of range: the teacher has layers 1..{n_layers}")
    return out


Response = str | Sequence[int]  # a response's text, or its token ids as given


class ReadsText:
    """What a teacher's card and a teacher with its weights share: prompts and responses read by their
    :class:`TextReader` (``reader``)."""

    reader: TextReader

    def prompt_ids(self, messages: Messages) -> list[int]:
        """Token ids of the chat-templated prompt up to where the assistant's answer starts, checked against the
        context (``TextReader.prompt_ids``)."""
        return self.reader.prompt_ids(messages)

    def response_ids(self, response: Response) -> list[int]:
        """Token ids of a response: its text tokenized alone, as text (no control tokens), no EOS; ids as given
        (``TextReader.response_ids``)."""
        return self.reader.response_ids(response)

    def check(self, index: int, prompt: list[int], response: list[int], name: str | None = None) -> None:
        """Raise BBWDError when the prompt or response ``index`` (or ``name``d) is empty or they do not fit the
        teacher's context (``TextReader.check``)."""
        self.reader.check(index, prompt, response, name)


@dataclass(frozen=True)
class TeacherCard(ReadsText):
    """A teacher's tokenizer, context and resolved layer, loaded without its weights."""

    name: str
    tokenizer: PreTrainedTokenizerBase
    n_layers: int
    layer: int
    max_length: int | None
    reader: TextReader
    proj_dim: int = PROJ_DIM
    proj_seed: int = PROJ_SEED


def read_card(files: ModelFiles, layer: int | None = None) -> TeacherCard:
    """The card of a model's files, present (``files.present``): its tokenizer and config, no weights.

    Parameters
    ----------
    files : ModelFiles
        What ``from_pretrained`` reads.
    layer : int or None
        The layer whose states are kept; None: half the model's.

    Returns
    -------
    TeacherCard
    """
    try:
        tokenizer = read_tokenizer(files)
        n_layers, max_length = read_shape(files)
    except OSError as exc:  # hub unreachable, gated repo, missing files
        raise files.unreadable(exc) from exc
    return TeacherCard(
        files.spec.name,
        tokenizer,
        n_layers,
        resolve_layer(n_layers, layer),
        max_length,
        TextReader.of(tokenizer, max_length),
    )


def _own_folder_file(files: ModelFiles, name: str) -> JSONObject | None:
    """A JSON file of a bundled model's folder, which bbwd writes itself from its pinned GGUF
    (``gguf.ensure_hf_folder``); None for any other model."""
    if files.spec.kind != "embedded" or files.gguf_file is not None:
        return None
    return cast(JSONObject, json.loads((Path(files.source) / name).read_text(encoding="utf-8")))


def read_tokenizer(files: ModelFiles) -> PreTrainedTokenizerBase:
    """A model's tokenizer, as ``AutoTokenizer`` reads it; a bundled model's by the class its folder names, the one
    ``AutoTokenizer`` picks for it (``tests/teachers/test_card.py``), without ``AutoTokenizer``, whose import takes
    torch's (a second or two that a run whose teacher never loads should not pay).

    Parameters
    ----------
    files : ModelFiles
        The model's files, present.

    Returns
    -------
    PreTrainedTokenizerBase
    """
    declared = _own_folder_file(files, "tokenizer_config.json") or {}
    cls = getattr(transformers, str(declared.get("tokenizer_class")), None)
    if isinstance(cls, type) and issubclass(cls, transformers.PreTrainedTokenizerBase) and "auto_map" not in declared:
        return cls.from_pretrained(files.source)
    return transformers.AutoTokenizer.from_pretrained(files.source, **files.extra)


def read_shape(files: ModelFiles) -> tuple[int, int | None]:
    """A model's layer count and context (``max_position_embeddings``; None without one), from its text config as
    ``AutoConfig`` reads it; a bundled model's from its folder's config.json, which holds both at its top, without
    ``AutoConfig`` (whose import takes torch's).

    Parameters
    ----------
    files : ModelFiles
        The model's files, present.

    Returns
    -------
    tuple of (int, int or None)
    """
    own = _own_folder_file(files, "config.json")
    if own is not None and "text_config" not in own and "num_hidden_layers" in own and "max_position_embeddings" in own:
        return int(cast(int, own["num_hidden_layers"])), int(cast(int, own["max_position_embeddings"]))
    config = transformers.AutoConfig.from_pretrained(files.source, **files.extra).get_text_config()
    return int(config.num_hidden_layers), getattr(config, "max_position_embeddings", None)
