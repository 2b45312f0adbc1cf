"""The generator Protocol: one verb, ``stream``, yielding text then one ``Usage``.

Every backend (local llama.cpp, transformers, an OpenAI-compatible server, Anthropic,
and ``specrag.testing``'s fake) implements ``stream(messages, max_tokens=..., temperature=...)`` as an
async iterator of ``str`` deltas ending with a ``Usage`` record (tokens in/out, time to
first token, total time). Closing the iterator early (``aclose()`` or task
cancellation) must stop the generation; backends that run in a thread check a flag
between tokens. Backends are registered by name, the shipped ones imported only when
first named (``BACKENDS``); ``make_generator(spec)`` builds one from a
``"backend:model"`` string.

Deliberately not here: prompts (``prompts``), retries/failover (resilience issue),
prices (``costs``).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from typing import AsyncIterator, Callable, Iterator, Protocol, runtime_checkable

from specrag.types import SpecragError, Usage  # noqa: F401  (Usage lives in types; named here too)

Message = dict  # {"role": "system" | "user" | "assistant", "content": str}


class GenerationError(SpecragError):
    """A backend failed; ``retryable`` tells the resilience layer whether to try again."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status


@runtime_checkable
class Generator(Protocol):
    name: str
    model: str

    def warm_up(self) -> "Generator": ...

    def stream(self, messages: list[Message], *, max_tokens: int = 256,
               temperature: float = 0.0) -> AsyncIterator[str | Usage]: ...


_REGISTRY: dict[str, Callable[..., Generator]] = {}
# names that settings written for an earlier release may still use: the llama-cpp-python
# runtime gave way to llama.cpp's own server engine, which runs the same GGUF files
ALIASES = {"llama-cpp": "llama-server"}
_warned: set[str] = set()


def canonical(backend: str) -> str:
    """The backend a name stands for (an alias is logged once, then followed)."""
    new = ALIASES.get(backend)
    if new is None:
        return backend
    if backend not in _warned:
        _warned.add(backend)
        logging.getLogger(__name__).warning(
            "generator backend '%s' is now '%s' (llama.cpp's server engine, the same GGUF "
            "files); update your settings", backend, new)
    return new


def register(name: str):
    def deco(factory):
        _REGISTRY[name] = factory
        return factory
    return deco


# the shipped backends, by name -> the module that registers it: imported when first
# named, so building one backend never loads the others' dependencies (``anthropic``,
# ``transformers``); other code registers more by importing its module (``testing``'s fake)
BACKENDS = {"llama-server": "specrag.generators.llama_server",
            "transformers": "specrag.generators.transformers_backend",
            "openai": "specrag.generators.openai_compat",
            "anthropic": "specrag.generators.anthropic_backend"}


def _load(backend: str) -> None:
    if backend not in _REGISTRY and backend in BACKENDS:
        importlib.import_module(BACKENDS[backend])


def is_local_backend(name: str) -> bool:
    """Whether a backend runs on this machine (it costs nothing, is not retried, and its
    speed says nothing about an outage): its class says so with ``local = True``."""
    name = canonical(name)
    _load(name)
    return bool(getattr(_REGISTRY.get(name), "local", False))


def _factory(backend: str, spec: str = "") -> Callable[..., Generator]:
    backend = canonical(backend)
    _load(backend)
    if backend not in _REGISTRY:
        raise ValueError(f"unknown generator backend '{backend}' in '{spec or backend}'; "
                         f"known: {', '.join(sorted(set(BACKENDS) | set(_REGISTRY)))}")
    return _REGISTRY[backend]


def check_options(backend: str, options: dict) -> None:
    """Raise ``ValueError`` naming any option the backend does not take (none is dropped)."""
    import inspect

    accepted = [n for n in inspect.signature(_factory(backend)).parameters if n != "model"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"generator backend '{backend}' has no option "
                         f"{', '.join(repr(u) for u in unknown)}; it takes: {', '.join(accepted)}")


def make_generator(spec: str, **options) -> Generator:
    """``"backend:model"`` (e.g. ``"anthropic:claude-sonnet-4-6"``) -> a generator; every
    option is one of the backend's own parameters (``check_options``)."""
    backend, _, model = spec.partition(":")
    backend = canonical(backend)
    factory = _factory(backend, spec)
    check_options(backend, options)
    return factory(model=model, **options)


async def collect(gen: Generator, messages: list[Message], **kw) -> tuple[str, Usage]:
    """Run a stream to the end: the full text and its usage."""
    parts, usage = [], None
    async for item in gen.stream(messages, **kw):
        if isinstance(item, Usage):
            usage = item
        else:
            parts.append(item)
    return "".join(parts), usage


async def stream_from_thread(produce: Callable[[threading.Event], Iterator[str | Usage]]
                             ) -> AsyncIterator[str | Usage]:
    """Run a blocking token iterator in a worker thread and yield its items here.

    ``produce(stop)`` must check ``stop.is_set()`` between tokens; closing this async
    generator (or cancelling its task) sets it, so a cancelled local generation stops
    within one token instead of running to ``max_tokens``.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    stop = threading.Event()
    done = object()

    def post(item) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the consumer's loop is closed: it stopped listening
            stop.set()

    def work():
        try:
            for item in produce(stop):
                post(item)
                if stop.is_set():
                    break
        except BaseException as err:  # noqa: BLE001 - re-raised in the consumer
            post(err)
        finally:
            post(done)

    thread = threading.Thread(target=work, daemon=True, name="specrag-generate")
    thread.start()
    try:
        while True:
            item = await queue.get()
            if item is done:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


class Timer:
    """TTFT and total time of one generation, in milliseconds."""

    def __init__(self):
        self.start = time.perf_counter()
        self.first: float | None = None

    def token(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()

    @property
    def ttft_ms(self) -> float:
        return ((self.first or time.perf_counter()) - self.start) * 1000

    @property
    def total_ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000
