"""A generator wrapper that redacts PII before a third-party call and restores it in the reply.

``wrap(generator, settings)`` returns the generator itself for local backends and a
``RedactingGenerator`` for third-party ones (Anthropic; an OpenAI-compatible server
that is not on this machine), following ``security.redact`` and
``security.redact_local``. The wrapper implements the Generator Protocol: the inner
backend sees placeholders only, the caller gets text with the values put back, and
closing or cancelling the wrapper closes the inner stream.

A backend (or a wrapper such as a failover chain) can declare ``remote = True`` or
``False`` to override the guess made from its ``name`` and ``base_url``.

Deliberately not here: detection and placeholders (``pii``, ``redact``); retries.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlparse

from specrag.security.pii import KINDS
from specrag.security.redact import Redaction, StreamRestorer
from specrag.settings import Settings
from specrag.types import Usage


def is_third_party(gen) -> bool:
    declared = getattr(gen, "remote", None)
    if isinstance(declared, bool):
        return declared
    name = getattr(gen, "name", "")
    if name == "anthropic":
        return True  # a custom base_url is a proxy in front of Anthropic, or a test double
    if name == "openai":
        return not _is_loopback(getattr(gen, "base_url", "") or "")
    return False


def _is_loopback(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def kinds_from(settings: Settings) -> tuple[str, ...]:
    wanted = [k.strip().lower() for k in settings.security.redact_types.split(",") if k.strip()]
    unknown = set(wanted) - set(KINDS)
    if unknown:
        raise ValueError(f"security.redact_types: unknown kind(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(KINDS)}")
    return tuple(wanted)


def wrap(gen, settings: Settings):
    """``gen``, wrapped in a ``RedactingGenerator`` when its calls leave this machine."""
    if gen is None or isinstance(gen, RedactingGenerator) or not settings.security.redact:
        return gen
    if not (settings.security.redact_local or is_third_party(gen)):
        return gen
    return RedactingGenerator(gen, kinds_from(settings))


class RedactingGenerator:
    def __init__(self, inner, kinds=KINDS):
        self.inner = inner
        self.kinds = tuple(kinds)
        self.last: Redaction | None = None  # the latest request's mapping (tests, audits)

    # name/model are read live: a lazily loaded backend learns its model in warm_up
    @property
    def name(self) -> str:
        return getattr(self.inner, "name", "")

    @property
    def model(self) -> str:
        return getattr(self.inner, "model", "")

    @property
    def remote(self) -> bool:
        return is_third_party(self.inner)

    def warm_up(self) -> "RedactingGenerator":
        self.inner.warm_up()
        return self

    async def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0):
        redaction = Redaction(self.kinds)
        safe = redaction.redact_messages(messages)
        self.last = redaction
        restorer = StreamRestorer(redaction)
        agen = self.inner.stream(safe, max_tokens=max_tokens, temperature=temperature)
        try:
            async for item in agen:
                if isinstance(item, Usage):
                    if tail := restorer.flush():
                        yield tail
                    yield item
                elif text := restorer.feed(item):
                    yield text
            if tail := restorer.flush():
                yield tail
        finally:
            # closing this wrapper (or cancelling its task) must stop the inner call
            if hasattr(agen, "aclose"):
                await agen.aclose()
