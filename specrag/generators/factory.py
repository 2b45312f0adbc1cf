"""Build the draft or heavy generator that settings name.

``generation.draft`` / ``generation.heavy`` is ``BACKEND`` for local backends (the model
file comes from ``models.ROLE`` through ``sources``) or ``BACKEND:MODEL`` for remote ones
(``anthropic:claude-sonnet-4-6``, ``openai:qwen2.5-7b``). Resolution of a local model
happens in ``warm_up`` of the returned generator, not here, so building is instant.
Options a backend takes beyond these (``load_in: 8bit`` for transformers, ``n_ctx`` for
llama.cpp, ``timeout_s`` for a remote API) come from ``generation.options``, keyed by
backend name, and are checked against the backend's own parameters.

Deliberately not here: retries and failover chains (resilience issue).
"""

from __future__ import annotations

import os

from specrag import sources
from specrag.generators.base import (
    ALIASES,
    Generator,
    canonical,
    check_options,
    is_local_backend,
    make_generator,
)
from specrag.generators.state_folders import root_for
from specrag.settings import Settings

# local backends whose model file comes from ``models.ROLE`` (resolved lazily by ``sources``)
FILE_BACKENDS = ("llama-server", "transformers")


def backend_options(backend: str, settings: Settings, role: str = "") -> dict:
    """What a backend gets from settings: the ``generation.*`` values it takes, then
    ``generation.options[BACKEND]`` over them. Checked here, so a misspelt option is an
    error at start-up that names it, not a setting silently ignored."""
    g = settings.generation
    backend = canonical(backend)
    options: dict = {}
    if backend == "llama-server":
        # prompt states follow the store's epoch (a delete forgets them); they are written
        # to files only in clear, so never with encryption at rest on
        options = {"threads": local_threads(settings), "prompt_cache": g.prompt_cache,
                   "parallel": g.parallel, "role": role,
                   "log_dir": str(settings.data_path / "logs"),
                   "states_dir": str(root_for(settings.data_path)),
                   "persist_states": not settings.security.encrypt}
    for name, alias_of in ALIASES.items():  # options written under an earlier name
        if alias_of == backend:
            options.update((g.options or {}).get(name, {}))
    options.update((g.options or {}).get(backend, {}))
    check_options(backend, {**options, **({"model_path": ""} if backend in FILE_BACKENDS else {})})
    return options


def local_threads(settings: Settings, cores: int | None = None) -> int | None:
    """CPU threads for one local model: ``generation.threads`` when set; else every core
    (None), except when ``eager_heavy_local`` lets two local models generate at once:
    then half the cores each, since two models each taking every core only thrash
    (oversubscribed llama.cpp threads spin-wait on each other)."""
    g = settings.generation
    if g.threads:
        return g.threads
    tiers = [t.split(":", 1)[0] for t in (g.draft, g.heavy)]
    if g.eager_heavy and g.eager_heavy_local and all(is_local_backend(t) for t in tiers):
        return max(1, (cores or os.cpu_count() or 2) // 2)
    return None


class _Lazy:
    """Resolves the local model file on first use, then delegates to the real backend."""

    def __init__(self, role: str, backend: str, settings: Settings):
        self.role, self.name, self.settings = role, canonical(backend), settings
        self.model = sources.source_for(role, settings).rsplit("/", 1)[-1].split("#")[0]
        self.options = backend_options(backend, settings, role)
        self._inner: Generator | None = None

    def build(self) -> Generator:
        """The backend itself, its model file resolved, nothing loaded."""
        path = sources.resolve(self.role, self.settings)
        options = dict(self.options)
        if self.role == "draft" and self.name == "llama-server" and "lora_path" not in options:
            adapter = sources.draft_adapter(self.settings)
            options["lora_path"] = str(adapter) if adapter else ""
        return make_generator(f"{self.name}:{path.stem}", model_path=path, **options)

    def warm_up(self):
        if self._inner is None:
            inner = self.build()
            inner.warm_up()
            self._inner, self.model = inner, inner.model
        return self

    def stream(self, messages, *, max_tokens: int = 256, temperature: float = 0.0):
        self.warm_up()
        return self._inner.stream(messages, max_tokens=max_tokens, temperature=temperature)

    def prefill(self, messages: list[dict], fill: float = 1.0,
                epoch: str | None = None) -> dict | None:
        """The backend's ``prefill`` (``pipeline.warm_states``), or None when it has none."""
        self.warm_up()
        prefill = getattr(self._inner, "prefill", None)
        return prefill(messages, fill, epoch) if prefill is not None else None

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


def remote_options(backend: str, settings: Settings, url: str | None = None) -> dict:
    """Where a remote backend is and which variable holds its key (``url`` overrides the
    configured base URL, for pools of endpoints)."""
    g = settings.generation
    if backend == "anthropic":
        return {"api_key_env": settings.anthropic_api_key_env,
                "base_url": url or g.anthropic_base_url or None}
    if backend == "openai":
        return {"base_url": url or g.openai_base_url, "api_key_env": g.openai_api_key_env}
    return {}


def from_settings(role: str, settings: Settings) -> Generator:
    spec = getattr(settings.generation, role)
    backend, _, model = spec.partition(":")
    backend = canonical(backend)
    if backend in FILE_BACKENDS and not model:
        return _Lazy(role, backend, settings)
    return make_generator(spec, **{**remote_options(backend, settings),
                                   **backend_options(backend, settings, role)})
