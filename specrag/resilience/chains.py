"""Build a tier's resilient generator from settings: endpoints -> retries -> pools -> chain.

``tier_from_settings("heavy", settings)`` reads ``resilience.heavy_chain`` (empty: the
``generation.heavy`` backend alone). Each entry is ``BACKEND[:MODEL][@URL[,URL...]]``:

- ``anthropic:claude-sonnet-4-6`` (``generation.anthropic_base_url`` or the SDK default),
- ``openai:qwen2.5-7b@http://gpu1:8000/v1,http://gpu2:8000/v1`` (a pool of two endpoints
  of one model, balanced by ``resilience.balance``; without ``@`` the
  ``generation.openai_base_url``),
- ``llama-cpp`` / ``transformers`` (the local model of that role, resolved lazily),
- ``fake:NAME`` (tests and ``bench chaos``, once ``specrag.testing`` is imported).

Remote endpoints get the HTTP connect timeout, a ``RetryingGenerator`` with their own
``RetryBudget``, and a circuit breaker in the chain. Local models are not retried and
have no first-token limit, and their breaker opens on failures only: their speed is the
machine's, not a sign of an outage. A tier is always a chain, even of one entry, so
every failure reaches a breaker.

Deliberately not here: the wrappers themselves; observers (``service`` adds them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from specrag.generators.base import is_local_backend, make_generator
from specrag.generators.factory import FILE_BACKENDS, backend_options, from_settings, remote_options
from specrag.resilience.balance import make_balancer
from specrag.resilience.breaker import CircuitBreaker
from specrag.resilience.failover import FallbackGenerator
from specrag.resilience.retry import RetryBudget, RetryingGenerator, RetryPolicy
from specrag.settings import Settings


@dataclass(frozen=True)
class Entry:
    backend: str
    model: str = ""
    urls: tuple[str, ...] = ()

    @property
    def local(self) -> bool:
        return is_local_backend(self.backend)


def parse_entry(spec: str) -> Entry:
    spec = spec.strip()
    backend, _, rest = spec.partition(":")
    if backend.startswith("http"):
        raise ValueError(f"chain entry '{spec}' must start with a backend name, e.g. openai:MODEL@URL")
    model, _, urls = rest.partition("@")
    return Entry(backend, model, tuple(u.strip() for u in urls.split(",") if u.strip()))


def chain_specs(role: str, settings: Settings) -> list[str]:
    specs = getattr(settings.resilience, f"{role}_chain") or [getattr(settings.generation, role)]
    return [specs] if isinstance(specs, str) else list(specs)


def _endpoint(role: str, entry: Entry, url: str | None, settings: Settings):
    """One raw backend generator."""
    r = settings.resilience
    if entry.backend in FILE_BACKENDS and not entry.model:
        return from_settings(role, settings.with_values(**{f"generation.{role}": entry.backend}))
    options = remote_options(entry.backend, settings, url)
    if entry.backend in ("anthropic", "openai"):  # the SDK brings its own httpx
        options["timeout_s"] = _http_timeout(r, "anthropic" if entry.backend == "anthropic"
                                             else "httpx")
    return make_generator(f"{entry.backend}:{entry.model}",
                          **{**options, **backend_options(entry.backend, settings, role)})


def _http_timeout(r, client: str):
    """Connect timeout for the HTTP client; the read side is bounded by the wrappers.

    The backends take ``timeout_s`` and hand it to their client, which also accepts its
    own ``Timeout`` object (the anthropic SDK brings its own httpx fork: ``anthropic.Timeout``).
    """
    if client == "anthropic":
        from anthropic import Timeout
    else:
        from httpx import Timeout
    return Timeout(r.total_timeout_s or None, connect=r.connect_timeout_s or None)


def tier_from_settings(role: str, settings: Settings, *, clock=time.monotonic, sleep=None,
                       overrides: dict | None = None):
    """The draft or heavy tier as one generator. ``overrides`` maps a chain entry to a ready
    generator (tests, the chaos benchmark)."""
    r = settings.resilience
    policy = RetryPolicy.from_settings(r)
    local_policy = RetryPolicy(max_attempts=1, first_token_timeout_s=None, total_timeout_s=None,
                               after_first_token=r.after_first_token)
    extra = {"sleep": sleep} if sleep else {}
    entries = []
    for spec in chain_specs(role, settings):
        entry = parse_entry(spec)
        urls = entry.urls or (None,)
        members = []
        for url in urls:
            raw = (overrides or {}).get(spec if len(urls) == 1 else f"{spec}#{url}") or \
                _endpoint(role, entry, url, settings)
            budget = RetryBudget(r.retry_budget_ratio, r.retry_budget_min, clock=clock)
            members.append(RetryingGenerator(raw, local_policy if entry.local else policy, budget,
                                             clock=clock, **extra))
        if len(members) == 1:
            entries.append(members[0])
        else:
            entries.append(FallbackGenerator(
                members, breakers=[CircuitBreaker.from_settings(f"{spec}#{u}", r, clock)
                                   for u in urls],
                balancer=make_balancer(r.balance), after_first_token=r.after_first_token,
                clock=clock))
    # even a tier of one entry goes through a chain: its breaker and attempts record a
    # failure (a local model's worker dying, say) like any other backend's
    specs = chain_specs(role, settings)
    return FallbackGenerator(entries, breakers=[
        CircuitBreaker.from_settings(s, r, clock, latency=not parse_entry(s).local)
        for s in specs], after_first_token=r.after_first_token, clock=clock)
