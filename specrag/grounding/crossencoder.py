"""Cross-encoders (text pair -> score) for the verifier and the reranker, one interface.

``CrossEncoder(settings, "verifier").predict([(premise, claim), ...])`` returns one
float per pair in [0, 1]; ``rank(query, documents, top_k)`` returns
``[{"corpus_id", "score"(, "text")}]`` best first (sentence-transformers' vocabulary).
Backends, chosen by what the model folder holds (``backend="auto"``):

- ``onnx-int8`` / ``onnx-fp32``: a folder with ``model-int8.onnx`` (what
  ``specrag train`` writes and the repository ships) and a ``tokenizer.json``;
  ``specrag.json`` in it records the max length. Pairs are sorted by length and cut
  into batches where the length jumps (``length_batches``), so each batch pads little;
  the verifier's int8 model scores each pair alone by default (``verify.batch_size`` 1:
  its scores do not move with their neighbours) and remembers the scores.
- ``torch``: a sentence-transformers ``CrossEncoder`` for a Hub id (e.g.
  ``cross-encoder/ms-marco-MiniLM-L-6-v2``) or a local Hugging Face folder. Models
  with several labels (NLI) give P(entailment).

Deliberately not here: which model a role uses (``sources``), splitting drafts into
claims and aggregating (``verifier``).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from specrag import sources
from specrag.settings import Settings

BACKENDS = ("auto", "onnx-int8", "onnx-fp32", "torch")
DEFAULT_MAX_LENGTH = 256


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class CrossEncoder:
    def __init__(self, settings: Settings, role: str = "verifier", model: str | None = None,
                 backend: str = "auto", batch_size: int | None = None, max_length: int | None = None,
                 threads: int = 0, onnx_path: str | None = None, cache_size: int = 4096):
        if backend not in BACKENDS:
            raise ValueError(f"cross-encoder backend must be one of {BACKENDS}, got '{backend}'")
        self.settings = settings
        self.role = role
        self.model = model  # a source string; None: the role's configured source
        self.backend = backend
        # the verifier's int8 model: ``verify.batch_size`` (1: each score independent of the
        # pairs beside it, see ``predict``), so every caller scores as serving does; any
        # other backend (fp32, torch) batches 32 (``warm_up``): nothing is quantised there
        self._batch_from_settings = (batch_size is None and role == "verifier"
                                     and settings is not None)
        self.batch_size = (settings.verify.batch_size if self._batch_from_settings
                           else batch_size or 32)
        if self.batch_size < 1:
            raise ValueError(f"{role} batch size must be at least 1, got {self.batch_size} "
                             "(verify.batch_size)")
        self.max_length = max_length
        self.threads = threads
        self.onnx_path = onnx_path
        # pairs remembered, only when each is scored alone (then a score is its pair's
        # alone, so a remembered one is exact): a sentence checked while the draft streams
        # is not scored again in the whole draft's verdict
        self.cache_size = cache_size if self.batch_size == 1 else 0
        self._cache: OrderedDict[tuple[str, str], float] = OrderedDict()
        self.model_dir: Path | None = None
        self._session = None
        self._st = None
        self._tok = None
        self._entail = None  # label index of "entailment" for multi-label models
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, role: str = "verifier") -> "CrossEncoder":
        """The ``role``'s model (``models.verifier`` / ``models.reranker``) as served."""
        return cls(settings, role)

    # -- loading ---------------------------------------------------------------
    def warm_up(self) -> "CrossEncoder":
        """Resolve and load the model once; later calls return at once."""
        with self._lock:
            if self._session is not None or self._st is not None:
                return self
            settings = self.settings
            if self.model:
                settings = settings.with_values(**{f"models.{self.role}": self.model})
            model_dir = sources.resolve(self.role, settings)
            meta = _meta(model_dir)
            backend = self.backend
            if backend == "auto":
                backend = "onnx-int8" if (model_dir / "model-int8.onnx").exists() else "torch"
            self.max_length = self.max_length or int(meta.get("max_length", DEFAULT_MAX_LENGTH))
            if backend == "torch":
                self._load_torch(model_dir)
            else:
                self._load_onnx(model_dir, backend)
            self.backend, self.model_dir = backend, model_dir
            if backend != "onnx-int8" and self._batch_from_settings:
                self.batch_size, self.cache_size = 32, 0
        return self

    def _load_onnx(self, model_dir: Path, backend: str) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as err:  # pragma: no cover
            raise ImportError("the ONNX cross-encoder needs onnxruntime and tokenizers: "
                              "pip install onnxruntime tokenizers") from err
        path = Path(self.onnx_path) if self.onnx_path else model_dir / f"model-{backend[5:]}.onnx"
        if not path.exists():
            raise FileNotFoundError(f"{path} not found ({self.role} backend {backend})")
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.enable_truncation(max_length=self.max_length, strategy="longest_first")
        tok.enable_padding(pad_id=tok.token_to_id("[PAD]") or 0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        if self.threads:
            opts.intra_op_num_threads = self.threads
        self._session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._tok = tok

    def _load_torch(self, model_dir: Path) -> None:
        try:
            from sentence_transformers import CrossEncoder as STCrossEncoder
        except ImportError as err:  # pragma: no cover
            raise ImportError("Hugging Face cross-encoders need sentence-transformers: "
                              "pip install sentence-transformers") from err
        st = STCrossEncoder(str(model_dir), device="cpu", max_length=self.max_length)
        labels = {int(k): str(v).lower() for k, v in (st.config.id2label or {}).items()}
        if len(labels) > 1:
            self._entail = next((i for i, n in labels.items() if "entail" in n), max(labels))
        self._st = st

    # -- scoring ---------------------------------------------------------------
    def predict(self, pairs: list[tuple[str, str]], batch_size: int | None = None) -> np.ndarray:
        """One score in [0, 1] per (text_a, text_b) pair, in input order.

        The int8 model quantises its activations per run, over every token of the batch
        (padding included), so a pair's score moves with the pairs run beside it: on 270
        real (chunk, draft sentence) pairs alone vs in batches of 9, mean 0.008 but up to
        0.50 apart (vs the same weights in fp32: up to 0.17 alone, 0.59 batched). A batch
        size of 1 makes every score a function of its pair alone."""
        self.warm_up()
        pairs = [(str(a), str(b)) for a, b in pairs]
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        bs = batch_size or self.batch_size
        if self._st is not None:
            if self._entail is not None:
                logits = self._st.predict(pairs, batch_size=bs, activation_fn=_identity(),
                                          convert_to_numpy=True, show_progress_bar=False)
                e = np.exp(logits - logits.max(axis=1, keepdims=True))
                return (e / e.sum(axis=1, keepdims=True))[:, self._entail].astype(np.float32)
            return np.asarray(self._st.predict(pairs, batch_size=bs, convert_to_numpy=True,
                                               show_progress_bar=False), dtype=np.float32)
        if self.cache_size and bs == 1:
            return self._remembered(pairs)
        sizes = [len(a) + len(b) for a, b in pairs]
        order = np.argsort(sizes, kind="stable")
        out = np.empty(len(pairs), dtype=np.float32)
        for idx in length_batches(order, sizes, bs):
            out[idx] = self._onnx_batch([pairs[i] for i in idx])
        return out

    def _remembered(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        out = np.empty(len(pairs), dtype=np.float32)
        for i, pair in enumerate(pairs):
            with self._lock:
                hit = self._cache.get(pair)
                if hit is not None:
                    self._cache.move_to_end(pair)
            if hit is None:
                hit = float(self._onnx_batch([pair])[0])
                with self._lock:
                    self._cache[pair] = hit
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
            out[i] = hit
        return out

    def clear_cache(self) -> None:
        """Forget remembered scores (benchmarks time the model, not the memory)."""
        with self._lock:
            self._cache.clear()

    def _onnx_batch(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        encs = self._tok.encode_batch(pairs)
        feed = {"input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64)}
        logits = self._session.run(None, {n: feed[n] for n in self._inputs})[0]
        return _sigmoid(logits.reshape(len(pairs), -1)[:, 0]).astype(np.float32)

    def rank(self, query: str, documents: list[str], top_k: int | None = None,
             return_documents: bool = False, batch_size: int | None = None) -> list[dict]:
        """Documents ordered by score for ``query``, best first (ties keep input order)."""
        scores = self.predict([(query, d) for d in documents], batch_size)
        order = sorted(range(len(documents)), key=lambda i: -float(scores[i]))[:top_k]
        return [{"corpus_id": i, "score": float(scores[i]),
                 **({"text": documents[i]} if return_documents else {})} for i in order]


PAD_RATIO = 1.5  # a pair this much longer than its batch's shortest starts a new batch


def length_batches(order, sizes, batch_size: int) -> list[np.ndarray]:
    """``order`` (indices sorted by ``sizes``) cut into batches of at most ``batch_size``,
    a new one starting where a pair is ``PAD_RATIO`` times its batch's first: every pair
    is padded to its batch's longest: 9 pairs of 50-125 tokens padded as one batch hold
    19% more tokens than as two (measured: 94 -> 91 ms; a 50-chunk rerank 525 -> 452 ms
    on a 2-core Zen 4). A second ``run`` costs ~1 ms."""
    out, batch = [], []
    for i in order:
        if batch and (len(batch) == batch_size or sizes[i] > PAD_RATIO * max(1, sizes[batch[0]])):
            out.append(np.asarray(batch))
            batch = []
        batch.append(int(i))
    if batch:
        out.append(np.asarray(batch))
    return out


def _identity():
    import torch

    return torch.nn.Identity()


def _meta(model_dir: Path) -> dict:
    path = model_dir / "specrag.json"
    return json.loads(path.read_text()) if path.is_file() else {}
