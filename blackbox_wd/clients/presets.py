"""API targets: named presets (OpenAI, DeepSeek) or any OpenAI-compatible endpoint given by URL."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from blackbox_wd.errors import BBWDError

if TYPE_CHECKING:
    from blackbox_wd.settings import Settings

LOCAL_DUMMY_KEY = "bbwd-local-no-key"


@dataclass(frozen=True)
class Preset:
    """A hosted model: where it lives, which key it needs and what its API honours."""

    model: str
    base_url: str
    key_env: str
    honours_n: bool = True
    logprobs: bool = True
    seed: bool = True


PRESETS: dict[str, Preset] = {
    "gpt-4o-mini": Preset("gpt-4o-mini", "https://api.openai.com/v1", "OPENAI_API_KEY"),
    # DeepSeek returns one choice whatever n is and documents no seed.
    "deepseek-chat": Preset(
        "deepseek-chat", "https://api.deepseek.com", "DEEPSEEK_API_KEY", honours_n=False, seed=False
    ),
}


@dataclass(frozen=True)
class Endpoint:
    """A resolved target: the model name to send, the base URL, and the API key to send it with."""

    model: str
    base_url: str
    api_key: str
    key_env: str | None
    honours_n: bool | None = None  # None: unknown, learnt from the first reply
    logprobs: bool = True
    seed: bool = True

    @property
    def host(self) -> str:
        """host[:port]/path of the base URL: the part of the endpoint that keys the cache."""
        parts = urlsplit(self.base_url)
        return f"{parts.hostname or ''}{':' + str(parts.port) if parts.port else ''}{parts.path.rstrip('/')}"

    def __repr__(self) -> str:  # never print the key
        return f"Endpoint(model={self.model!r}, base_url={self.base_url!r}, key_env={self.key_env!r})"


def is_loopback(url: str) -> bool:
    """True when the URL's host is localhost or a loopback address."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_endpoint(
    target: str | None, base_url: str | None, api_key_env: str | None, require_key: bool = True
) -> Endpoint:
    """The endpoint for a target: a preset (overridable URL/key variable) or a model at ``base_url``.

    ``require_key=False`` (replay) puts a dummy key in place of a missing one.
    """
    preset = PRESETS.get(target or "")
    if preset is None and base_url is None:
        raise BBWDError(f"'{target}' is not an API preset ({', '.join(PRESETS)}): give --base-url for other models")
    if not target:
        raise BBWDError("an API target needs a model name: pass --target with the name the server serves")
    url = (base_url or preset.base_url).rstrip("/")  # type: ignore[union-attr]
    if urlsplit(url).scheme not in ("http", "https"):
        raise BBWDError(f"--base-url must be an http(s) URL, got '{url}'")
    key_env = api_key_env or (preset.key_env if preset else None)
    key = os.environ.get(key_env, "") if key_env else ""
    if not key:
        if (key_env is None and is_loopback(url)) or not require_key:
            key = LOCAL_DUMMY_KEY
        elif key_env is None:
            raise BBWDError(f"no API key for {url}: set an environment variable and name it with --api-key-env")
        else:
            raise BBWDError(f"{key_env} is not set: export {key_env}=<your API key> to use {target}")
    if preset is not None:
        return Endpoint(target, url, key, key_env, preset.honours_n, preset.logprobs, preset.seed)
    return Endpoint(target, url, key, key_env)


def api_endpoint(settings: Settings) -> Endpoint:
    """The endpoint of the settings' API target; BBWDError for a missing key (none needed to replay a fixture)."""
    replay = os.environ.get("BBWD_API_REPLAY")
    if replay and os.environ.get("BBWD_API_RECORD"):
        raise BBWDError("set BBWD_API_REPLAY or BBWD_API_RECORD, not both")
    return resolve_endpoint(settings.target, settings.base_url, settings.api_key_env, require_key=not replay)
