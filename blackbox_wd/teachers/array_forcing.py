"""Teacher forcing in numpy (:class:`ArrayTeacher`): a bundled Llama teacher's mid-layer states, as
:class:`~blackbox_wd.teachers.forcing.HFTeacher` gives them, without torch or transformers' model code.

A run that scores one prompt (``bbwd score``) spends most of its start-up importing those (about 3 s on a 2-core CPU)
for a pass that takes a fraction of a second; this teacher maps the weights from the safetensors file and runs the
pass in numpy (``arrays.LlamaArrays``), its states equal to transformers' to float32 rounding. It reads text with the
same :class:`~blackbox_wd.teachers.card.TextReader` and projects with the same matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.special import log_softmax

from blackbox_wd.errors import BBWDError
from blackbox_wd.records import TokenStates
from blackbox_wd.teachers.arrays import LlamaArrays
from blackbox_wd.teachers.card import TeacherCard
from blackbox_wd.teachers.projection import projection_matrix
from blackbox_wd.teachers.teacher import Teacher, distinct_pairs


class ArrayTeacher(Teacher):
    """Teacher-forces responses through a Llama model in numpy on CPU and returns their mid-layer token states.

    Parameters
    ----------
    card : TeacherCard
        The teacher's tokenizer, layer, context and projection (``card.read_card``).
    folder : Path
        Its Hugging Face folder (config.json, model.safetensors in float32).
    """

    device = "cpu"

    def __init__(self, card: TeacherCard, folder: Path) -> None:
        self.arrays = LlamaArrays(folder)
        self.name, self.tokenizer, self.reader = card.name, card.tokenizer, card.reader
        self.n_layers, self.layer, self.max_length = card.n_layers, card.layer, card.max_length
        self.hidden_size = self.arrays.shape.hidden
        self.proj_dim, self.proj_seed = card.proj_dim, card.proj_seed
        self.projection = projection_matrix(self.hidden_size, self.proj_dim, self.proj_seed)

    def encode_ids(self, pairs: Sequence[tuple[list[int], list[int]]], logprobs: bool = False) -> list[TokenStates]:
        """Teacher-force (prompt ids, response ids) pairs, as ``HFTeacher.encode_ids``: each distinct prompt once with
        its distinct responses; pairs with the same prompt and response get the same TokenStates object. With
        ``logprobs``, every block runs and each token's log-prob is read from the logits."""
        for i, pair in enumerate(pairs):
            self.check(i, *pair)
        where = distinct_pairs(pairs)
        out: dict[int, TokenStates] = {}
        for prompt_ids, responses in where.items():
            mids, finals, prompt_final = self.arrays.forward(prompt_ids, list(responses), self.layer, final=logprobs)
            for n, (tokens, rows) in enumerate(responses.items()):
                mid = mids[n].astype(np.float64)
                lp = None
                if finals is not None and prompt_final is not None:
                    before = np.concatenate([prompt_final[None], finals[n][:-1]])  # the state preceding each token
                    lp = self._token_logprobs(before, np.asarray(tokens))
                ts = TokenStates(states=mid @ self.projection, last=mid[-1], logprobs=lp)
                for i in rows:
                    out[i] = ts
        return [out[i] for i in range(len(pairs))]

    def _token_logprobs(self, hidden: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """log p(target_t | prefix) from the final normed states preceding each target token (float32 logits)."""
        logprobs = log_softmax(self.arrays.logits(hidden), axis=-1)
        return logprobs[np.arange(len(targets)), targets].astype(np.float64)


def array_teacher(card: TeacherCard, folder: Path) -> ArrayTeacher | None:
    """The :class:`ArrayTeacher` of a teacher whose folder numpy can force (a plain Llama's config.json, float32
    safetensors); None for any other.

    Parameters
    ----------
    card : TeacherCard
        The teacher's card.
    folder : Path
        Its Hugging Face folder.

    Returns
    -------
    ArrayTeacher or None
    """
    try:
        return ArrayTeacher(card, folder)
    except (BBWDError, OSError, KeyError, ValueError):  # another architecture, dtype or layout
        return None
