"""Build the draft or heavy generator that settings name.

``generation.draft`` / ``generation.heavy`` is ``BACKEND`` for local backends (the model
file comes from ``models.ROLE`` through ``sources``) or ``BACKEND:MODEL`` for remote ones
(``anthropic:claude-sonnet-4-5``, ``openai:qwen2.5-7b``). Resolution of a local model
happens in ``warm_up`` of the returned generator, not here, so building is instant.

Deliberately not here: retries and failover chains (resilience issue).
"""

from __future__ import annotations

from .. import sources
from ..settings import Settings
from .base import Generator, make_generator

LOCAL = ("llama-cpp", "transformers")


class _Lazy:
    """Resolves the local model file on first use, then delegates to the real backend."""

    def __init__(self, role: str, backend: str, settings: Settings):
        self.role, self.name, self.settings = role, backend, settings
        self.model = sources.source_for(role, settings).rsplit("/", 1)[-1].split("#")[0]
        self._inner: Generator | None = None

    def warm_up(self):
        if self._inner is None:
            path = sources.resolve(self.role, self.settings)
            g = self.settings.generation
            options = {"threads": g.threads or None, "prompt_cache": g.prompt_cache}
            if self.name == "llama-cpp":
                options.update(isolation=g.local_isolation, extra_bufts=g.extra_bufts,
                               role=self.role)
            inner = make_generator(f"{self.name}:{path.stem}", model_path=path, **options)
            inner.warm_up()
            self._inner, self.model = inner, inner.model
        return self

    def stream(self, messages, **kw):
        self.warm_up()
        return self._inner.stream(messages, **kw)


def from_settings(role: str, settings: Settings) -> Generator:
    spec = getattr(settings.generation, role)
    backend, _, model = spec.partition(":")
    g = settings.generation
    if backend in LOCAL and not model:
        return _Lazy(role, backend, settings)
    if backend == "anthropic":
        return make_generator(spec, api_key_env=settings.anthropic_api_key_env,
                              base_url=g.anthropic_base_url or None)
    if backend == "openai":
        return make_generator(spec, base_url=g.openai_base_url, api_key_env=g.openai_api_key_env)
    return make_generator(spec)
