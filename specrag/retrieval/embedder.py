"""Bi-encoder embeddings for queries and documents: int8 ONNX by default.

``Embedder(settings).encode_queries(texts)`` / ``encode_documents(texts)`` return
L2-normalised float32 rows. Backends: ``onnx-int8`` (default), ``onnx-fp32`` (kept for
comparison) and ``torch`` (sentence-transformers, for models ONNX export can't handle).
Inputs are sorted by length before batching so each batch pads as little as possible.

Deliberately not here: storage, chunking or any knowledge of Chroma.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

from specrag import sources
from specrag.retrieval.onnx_export import ensure_onnx
from specrag.settings import Settings

BACKENDS = ("onnx-int8", "onnx-fp32", "torch")


class Embedder:
    def __init__(self, settings: Settings, backend: str | None = None,
                 batch_size: int | None = None, device: str = "cpu", threads: int = 0):
        self.settings = settings
        self.backend = backend or settings.embedder.backend
        if self.backend not in BACKENDS:
            raise ValueError(f"embedder.backend must be one of {BACKENDS}, got '{self.backend}'")
        self.batch_size = batch_size or settings.embedder.batch_size
        self.max_seq_length = settings.embedder.max_seq_length
        self.device = device
        self.threads = threads
        self.model_dir: Path | None = None
        self.tokenizer = None
        self.dimension = 0
        self._session = None
        self._st_model = None
        self._pooling = "mean"
        self._lock = threading.Lock()

    # -- loading ---------------------------------------------------------------
    def warm_up(self) -> "Embedder":
        """Resolve, export and load the model once; later calls return at once."""
        with self._lock:
            if self.tokenizer is not None:
                return self
            model_dir = sources.resolve("embedder", self.settings)
            self.tokenizer = load_tokenizer(model_dir, self.max_seq_length)
            self._pooling = _pooling_mode(model_dir)
            if self.backend == "torch":
                from sentence_transformers import SentenceTransformer

                self._st_model = SentenceTransformer(str(model_dir), device=self.device)
                self.dimension = self._st_model.get_sentence_embedding_dimension()
            else:
                import onnxruntime as ort  # heavy: the ONNX runtime, loaded with the model

                path = ensure_onnx(model_dir, self.settings.cache_path)[self.backend[5:]]
                opts = ort.SessionOptions()
                if self.threads:
                    opts.intra_op_num_threads = self.threads
                self._session = ort.InferenceSession(str(path), opts,
                                                     providers=["CPUExecutionProvider"])
                self._input_names = [i.name for i in self._session.get_inputs()]
                self.dimension = int(self._encode_batch(["dimension probe"]).shape[1])
            self.model_dir = model_dir
        return self

    # -- encoding --------------------------------------------------------------
    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode([self.settings.embedder.query_prefix + t for t in texts])

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode([self.settings.embedder.document_prefix + t for t in texts])

    def count_tokens(self, text: str) -> int:
        self.warm_up()
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def _encode(self, texts: list[str]) -> np.ndarray:
        self.warm_up()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self._st_model is not None:
            return self._st_model.encode(texts, batch_size=self.batch_size,
                                         normalize_embeddings=True,
                                         convert_to_numpy=True).astype(np.float32)
        order = np.argsort([len(t) for t in texts])
        out = np.empty((len(texts), self.dimension or 1), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            idx = order[start:start + self.batch_size]
            vecs = self._encode_batch([texts[i] for i in idx])
            if out.shape[1] != vecs.shape[1]:
                out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
            out[idx] = vecs
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(texts)
        feed_all = {
            "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
        }
        feed = {n: feed_all[n] for n in self._input_names}
        hidden = self._session.run(None, feed)[0]
        mask = feed_all["attention_mask"][..., None].astype(np.float32)
        if self._pooling == "cls":
            vecs = hidden[:, 0]
        else:
            vecs = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return (vecs / np.clip(norms, 1e-12, None)).astype(np.float32)


def load_tokenizer(model_dir: Path, max_length: int = 256):
    """A fast ``tokenizers.Tokenizer`` with truncation and batch padding set."""
    from tokenizers import Tokenizer

    path = model_dir / "tokenizer.json"
    if path.exists():
        tok = Tokenizer.from_file(str(path))
    else:  # older model folders ship only vocab files
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(model_dir)).backend_tokenizer
    tok.enable_truncation(max_length=max_length)
    pad_id = tok.token_to_id("[PAD]") or 0
    tok.enable_padding(pad_id=pad_id, pad_token="[PAD]")
    return tok


def _pooling_mode(model_dir: Path) -> str:
    cfg = model_dir / "1_Pooling" / "config.json"
    if cfg.exists() and json.loads(cfg.read_text()).get("pooling_mode_cls_token"):
        return "cls"
    return "mean"
