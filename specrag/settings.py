"""One settings object for specrag: defaults <- YAML file <- ``SPECRAG_*`` env vars.

``Settings.load()`` builds the effective settings and remembers where each value
came from (``default``, ``file:PATH`` or ``env:NAME``) so ``specrag config show``
can explain them. Nested fields are addressed with ``__`` in env vars, e.g.
``SPECRAG_RETRIEVAL__TOP_K=20``. Secrets are never stored here, only the *name*
of the environment variable that holds them.

Deliberately not here: validation of model availability (see ``sources``) and any
I/O beyond reading the YAML file.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints

import yaml

ENV_PREFIX = "SPECRAG_"
PROFILES = ("offline", "hub")


@dataclass(frozen=True)
class ModelSettings:
    """Model per role; empty means "the profile's default" (see ``sources.PROFILES``)."""

    embedder: str = ""
    draft: str = ""
    verifier: str = ""
    reranker: str = ""
    heavy: str = ""
    # a llama.cpp LoRA adapter added to the draft model at run time: empty means the
    # profile's ("none" in both: no adapter ships, ``sources.PROFILES``); "none": the
    # draft as it comes
    draft_adapter: str = ""


@dataclass(frozen=True)
class EmbedderSettings:
    backend: str = "onnx-int8"  # onnx-int8 | onnx-fp32 | torch
    batch_size: int = 32
    max_seq_length: int = 256
    query_prefix: str = ""
    document_prefix: str = ""


@dataclass(frozen=True)
class ChunkingSettings:
    chunk_size: int = 200  # tokens of the embedder's tokenizer
    chunk_overlap: int = 40
    # a chunk's characters at most (0: 8 a token of chunk_size): a long run without spaces
    # is one embedder token but thousands of the models' (``ingest.chunker``)
    chunk_max_chars: int = 0
    max_file_mb: float = 50.0
    # a few kilobytes can expand to millions of characters (``ingest.limits``)
    max_chars: int = 10_000_000
    # "process": each file is parsed in a parser process that is killed past these
    # limits (``ingest.isolation``); "inline": in the caller's process, no limits
    parse_isolation: str = "process"
    parse_timeout_s: float = 120.0
    parse_memory_mb: int = 2048


@dataclass(frozen=True)
class RetrievalSettings:
    top_k: int = 50  # the broad speculative set
    # chunks the draft sees: the 0.5B is more often right from one (BENCHMARKS.md)
    draft_k: int = 1
    # the reranker picks the draft's draft_k chunks from the first this many hits (0:
    # the retrieval order): with one chunk it must be the right one (``draft_pick``)
    draft_pool: int = 5
    # ... but its best replaces the retrieval's first hit only when it scores more than
    # this above it: the reranker is surer than right on long several-topic sections
    draft_margin: float = 0.2
    verify_k: int = 10  # chunks the verifier checks the draft against
    heavy_k: int = 8  # reranked chunks the heavy model sees, at most
    # ... of which those past the first heavy_min_k only when the reranker scores them at
    # least this (0: all heavy_k): most of the top 8 score near zero (``heavy_pick``)
    heavy_min_score: float = 0.05
    heavy_min_k: int = 3
    # each prompt chunk cut to its sentences most about the question, at most N words (0: whole)
    draft_words: int = 0
    heavy_words: int = 0
    rerank: bool = True  # the heavy tier sees the reranked order (gold in top 3 +5.3 points)
    # reciprocal rank fusion of the reranker's and the bi-encoder's orders (``fusion``), for
    # a weak reranker
    rerank_fusion: bool = False
    # also rank by BM25 (SQLite FTS5, ``retrieval.keyword``) and fuse the two lists by
    # reciprocal rank (recall@3 +5.6 points on HaluEval-QA, +7.0 on SQuAD)
    hybrid: bool = True


@dataclass(frozen=True)
class VerifySettings:
    # grounding alone (no question, or acceptance off) and each sentence's mark
    # (`specrag calibrate`: precision 0.95 on 2,632 dev drafts of seven sources)
    threshold: float = 0.7937
    per_sentence: int = 1  # chunks per sentence, word-overlap prefilter (0: all); 1 ~ 3 on e2e
    evidence_words: int = 64  # each chunk cut to its sentences most about the claim; 0: whole
    batch_size: int = 1  # pairs per int8 verifier run; 1: a score is its pair's alone
    aggregate: str = "min"  # over sentences: min | mean
    escalate_abstentions: bool = True  # a draft that only says "the documents do not say"
    head: bool = True  # combine the cross-encoder with key-span coverage (head.json)
    # P(right) from grounding and "does it answer the question" (acceptance.json):
    # builtin (beside the verifier) | off (grounding alone) | a path (`calibrate --e2e`)
    acceptance: str = "builtin"
    answer_threshold: float = 0.6025  # P(right) needed instead, when acceptance is on (calibrate --e2e)
    supported_threshold: float = 0.5  # grounded at least this: "supported by the documents"
    check_heavy: bool = True  # verify the heavy answer too, so every shown answer has a verdict
    # score each draft sentence as it completes; one that rules the draft out stops it and
    # starts the heavy tier at once (not under draft-only; ``pipeline.early``)
    early_reject: bool = True


@dataclass(frozen=True)
class GenerationSettings:
    """Backends as ``NAME`` (local: model from ``models.ROLE``) or ``NAME:MODEL`` (remote)."""

    # llama-server (llama.cpp's server engine, a prebuilt wheel) | transformers |
    # openai:MODEL | anthropic:MODEL
    draft: str = "llama-server"
    heavy: str = "llama-server"  # e.g. anthropic:claude-sonnet-4-6
    policy: str = "lazy"  # lazy | eager | routed | draft-only | heavy-only
    eager_heavy: bool = True  # eager also starts the heavy generation, not only the rerank
    # ... even with both models on this machine; off: on 2 cores both then get slower
    eager_heavy_local: bool = False  # and then each local model takes half the cores
    draft_max_tokens: int = 96
    heavy_max_tokens: int = 256
    # documents and question of one prompt, at most (estimated, ``pipeline.prompt_fit``):
    # within llama.cpp's n_ctx 4096 less the answer; raise both together for longer prompts
    prompt_tokens: int = 3200
    temperature: float = 0.0
    openai_base_url: str = "http://127.0.0.1:8000/v1"
    openai_api_key_env: str = "OPENAI_API_KEY"
    anthropic_base_url: str = ""
    threads: int = 0  # CPU threads for local models; 0: all cores
    # requests one local model serves at once (llama-server's slots, continuously batched);
    # 0: two per core, 2 to 8
    parallel: int = 0
    prompt_cache: bool = True  # llama.cpp reuses the previous prompt's prefix (off in benchmarks)
    warm_states: int = 1024  # prefill draft prompts of collections up to this many chunks; 0 off
    # more options per backend, checked against its parameters: {"transformers": {"load_in":
    # "8bit", "device": "cpu"}, "llama-server": {"n_ctx": 8192}, "openai": {"timeout_s": 30}}
    options: dict = field(default_factory=dict)
    prices: dict = field(default_factory=lambda: {
        "claude-opus-4-1": [15.0, 75.0], "claude-sonnet-4-6": [3.0, 15.0],
        "claude-sonnet-4-5": [3.0, 15.0],
        "claude-haiku-4-5": [1.0, 5.0]})  # USD per million tokens [input, output]


@dataclass(frozen=True)
class RoutingSettings:
    """The ``routed`` policy's router (``specrag.routing``): draft, or heavy at once."""

    model: str = "builtin"  # builtin (specrag/models/router) | a router.json path
    # draft when P(the draft will be accepted and right) >= this; negative: the model's own;
    # lower it when the heavy tier is billed and cost matters more than time
    threshold: float = -1.0


@dataclass(frozen=True)
class ChatSettings:
    """Follow-up questions (``pipeline.followup``): the conversation so far rewrites them."""

    # what a follow-up is searched as: "turns" (the question, then the names and a few words
    # of its topic's earlier questions: no model call, best recall measured), "previous"
    # (the previous question, then this one), "model" (the draft rewrites it), "off"
    rewrite: str = "turns"
    history_turns: int = 3  # earlier question/answer pairs the rewrite sees
    rewrite_max_tokens: int = 48


@dataclass(frozen=True)
class AuditSettings:
    sample_rate: float = 0.05  # fraction of answers stored and scored in the background


@dataclass(frozen=True)
class StoreSettings:
    chroma_url: str = ""  # empty: embedded PersistentClient under data_dir/chroma
    collection: str = "default"
    scrub_deleted: bool = True  # rewrite chroma.sqlite3 after a delete/replace: old text leaves the disk


@dataclass(frozen=True)
class SecuritySettings:
    """Users and collection ACLs, PII redaction, encryption at rest (``specrag.security``)."""

    users_file: str = ""  # YAML of users/roles/collection ACLs; empty: single-user local mode
    redact: bool = True  # replace PII with placeholders before third-party model calls
    redact_local: bool = False  # also redact for local models (llama-cpp, loopback servers)
    redact_types: str = "email,phone,card,iban,ssn,ip,name"
    encrypt: bool = False  # AES-256-GCM for files specrag writes (not the vector store)
    key_env: str = "SPECRAG_ENCRYPTION_KEY"  # name of the env var holding the key (base64)
    key_file: str = ""  # or a file holding it (mode 600)
    max_question_chars: int = 2000
    # a request's headers, then its body, must arrive within this long (s; 0: no limit):
    # a client that stalls half-way is cut off (``specrag.api.body``, ``api.server``)
    read_timeout_s: float = 30.0


@dataclass(frozen=True)
class ResilienceSettings:
    """Retries, failover chains, load balancing and circuit breakers (``specrag.resilience``).

    A chain entry is ``BACKEND[:MODEL][@URL[,URL...]]``; several URLs make a pool of
    endpoints balanced by ``balance``. An empty chain means the ``generation`` backend alone.
    """

    draft_chain: list = field(default_factory=list)  # e.g. ["openai:qwen@http://gpu:8000/v1", "llama-cpp"]
    heavy_chain: list = field(default_factory=list)  # e.g. ["anthropic:claude-sonnet-4-6", "llama-cpp"]
    balance: str = "round-robin"  # round-robin | least-latency (endpoints of one entry)
    max_attempts: int = 3  # per remote backend, the first try included
    backoff_base_s: float = 0.25
    backoff_max_s: float = 4.0
    retry_budget_ratio: float = 0.2  # retries may add 20% to a backend's recent requests
    retry_budget_min: int = 10  # ... plus this many per 10 s window
    connect_timeout_s: float = 5.0
    first_token_timeout_s: float = 20.0  # remote backends; 0: no limit
    total_timeout_s: float = 120.0
    after_first_token: str = "resume"  # resume | buffer | never (no text is ever repeated)
    breaker_p99_ms: float = 2000.0  # rolling p99 time to first token that opens the circuit
    breaker_window: int = 100
    breaker_window_s: float = 60.0
    breaker_min_samples: int = 10
    breaker_failures: int = 5  # consecutive failures that open it
    breaker_open_s: float = 30.0  # then half-open: probes decide
    breaker_probes: int = 1


@dataclass(frozen=True)
class TelemetrySettings:
    """OpenTelemetry spans and metrics; exporters come from the standard ``OTEL_*`` variables."""

    enabled: bool = True
    record_content: bool = False  # put question and document text on spans


@dataclass(frozen=True)
class BudgetSettings:
    """The SQLite usage ledger and optional spending limits (USD, 0: none)."""

    ledger: bool = True
    ledger_file: str = "ledger.sqlite3"  # under data_dir
    session_usd: float = 0.0  # per session; with a users file per user, across their sessions
    day_usd: float = 0.0  # per UTC day, all sessions
    on_exceeded: str = "draft-only"  # draft-only | refuse


@dataclass(frozen=True)
class ConcurrencySettings:
    """Questions answered at once, and how many may wait before callers are told 'busy';
    per caller (the signed-in user with a users file, else the session) a share and a rate."""

    max_concurrent: int = 4
    max_queue: int = 16
    queue_timeout_s: float = 30.0
    per_user_concurrent: int = 2  # one caller's questions answered at once (more wait); 0: no cap
    per_user_per_minute: float = 30.0  # one caller's questions a minute, on average; 0: no limit
    per_user_burst: int = 10  # ... of which this many may come at once


@dataclass(frozen=True)
class Settings:
    data_dir: str = "~/.specrag"
    cache_dir: str = ""  # empty: data_dir/cache
    profile: str = "offline"  # offline | hub
    models: ModelSettings = field(default_factory=ModelSettings)
    embedder: EmbedderSettings = field(default_factory=EmbedderSettings)
    chunking: ChunkingSettings = field(default_factory=ChunkingSettings)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    verify: VerifySettings = field(default_factory=VerifySettings)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    routing: RoutingSettings = field(default_factory=RoutingSettings)
    chat: ChatSettings = field(default_factory=ChatSettings)
    audit: AuditSettings = field(default_factory=AuditSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    anthropic_api_key_env: str = "ANTHROPIC_API_KEY"
    # resilience issue: retries/failover, OpenTelemetry, ledger + budgets, admission
    resilience: ResilienceSettings = field(default_factory=ResilienceSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    concurrency: ConcurrencySettings = field(default_factory=ConcurrencySettings)

    # -- derived paths -------------------------------------------------------
    @property
    def data_path(self) -> Path:
        return Path(os.path.expanduser(self.data_dir))

    @property
    def cache_path(self) -> Path:
        return Path(os.path.expanduser(self.cache_dir)) if self.cache_dir else self.data_path / "cache"

    # -- dict / YAML round trip ------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Settings":
        return _build(cls, data, "")

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> "Settings":
        return cls.from_dict(yaml.safe_load(text) or {})

    def with_values(self, **dotted: Any) -> "Settings":
        """Copy with values replaced by dotted path, e.g. ``{"retrieval.top_k": 5}``."""
        data = self.to_dict()
        for key, value in dotted.items():
            _set_path(data, key.split("."), value)
        return Settings.from_dict(data)

    # -- loading ---------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike | None = None,
             env: dict[str, str] | None = None) -> tuple["Settings", dict[str, str]]:
        """Effective settings and a map ``dotted.key -> origin``.

        The YAML file is ``path``, else ``$SPECRAG_CONFIG``, else
        ``DATA_DIR/specrag.yaml`` when it exists.
        """
        env = dict(os.environ if env is None else env)
        data = cls().to_dict()
        origins = {k: "default" for k in _flat(data)}
        path = path or env.get(ENV_PREFIX + "CONFIG")
        if not path:
            data_dir = env.get(ENV_PREFIX + "DATA_DIR", data["data_dir"])
            candidate = Path(os.path.expanduser(data_dir)) / "specrag.yaml"
            path = candidate if candidate.exists() else None
        if path:
            file_data = yaml.safe_load(Path(path).read_text()) or {}
            if not isinstance(file_data, dict):
                raise ValueError(f"{path}: settings file must be a mapping")
            for key, value in _flat(file_data).items():
                if key in RETIRED:
                    logging.getLogger(__name__).warning("%s: '%s' is ignored: %s", path, key,
                                                        RETIRED[key])
                    continue
                if key not in origins:
                    raise ValueError(f"{path}: unknown setting '{key}'")
                _set_path(data, key.split("."), value)
                origins[key] = f"file:{path}"
        for name, raw in env.items():
            if not name.startswith(ENV_PREFIX) or name == ENV_PREFIX + "CONFIG":
                continue
            key = name[len(ENV_PREFIX):].lower().replace("__", ".")
            if key in origins:
                _set_path(data, key.split("."), yaml.safe_load(raw) if raw else "")
                origins[key] = f"env:{name}"
        settings = cls.from_dict(data)
        if settings.profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, got '{settings.profile}' "
                             f"(set SPECRAG_PROFILE)")
        return settings, origins


_LEAF_MAPPINGS = {"generation.prices", "generation.options"}  # dict-valued, replaced whole
# settings of earlier releases that nothing reads now: a file naming them still loads
RETIRED = {"generation.local_isolation": "local models always run in a process of their own",
           "generation.extra_bufts": "the llama-cpp-python runtime it tuned is gone"}


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and f"{prefix}{key}" not in _LEAF_MAPPINGS:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def flat(settings: Settings) -> dict[str, Any]:
    """Dotted key -> value, the shape ``config show`` prints."""
    return _flat(settings.to_dict())


def _set_path(data: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        data = data.setdefault(key, {})
    data[keys[-1]] = value


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"unknown setting(s): {', '.join(where + u for u in sorted(unknown))}")
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        hint, value = hints[f.name], data[f.name]
        if is_dataclass(hint):
            kwargs[f.name] = _build(hint, value or {}, f"{where}{f.name}.")
        else:
            kwargs[f.name] = _coerce(hint, value, where + f.name)
    return cls(**kwargs)


def _coerce(hint: Any, value: Any, name: str) -> Any:
    try:
        if hint is bool and isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        if hint in (int, float, str, bool):
            return hint(value) if value is not None else hint()
        if hint is dict and not isinstance(value, dict):
            raise TypeError
    except (TypeError, ValueError):
        raise ValueError(f"setting '{name}' expects {getattr(hint, '__name__', hint)}, "
                         f"got {value!r}") from None
    return value

