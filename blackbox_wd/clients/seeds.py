"""The seed of each sample of a prompt, shared by both local samplers (transformers' and llama.cpp's); stdlib only,
so that choosing llama.cpp imports no torch nor transformers."""

from __future__ import annotations

import hashlib
import json

from blackbox_wd.records import Messages


def sample_seed(seed: int, messages: Messages, index: int) -> int:
    """The seed of sample ``index`` of a prompt: a hash of (seed, messages, index), whatever else is drawn.

    Parameters
    ----------
    seed : int
        The run's seed.
    messages : Messages
        The prompt.
    index : int
        The sample's index within the prompt.

    Returns
    -------
    int
        A seed below 2**63.
    """
    payload = json.dumps([seed, messages, index], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(payload.encode()).digest()[:8], "big") >> 1
