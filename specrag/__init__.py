"""specrag: speculative RAG. A small model drafts from your documents, a cross-encoder
checks every sentence, and the heavy model answers only when the draft is not supported.

The public API (imported on first use, so ``import specrag`` stays light):

- ``Settings``: every option (``Settings.load(path)`` reads the YAML file ``path``, the
  CLI's ``--config``, else ``$SPECRAG_CONFIG``, else ``DATA_DIR/specrag.yaml``, then
  ``SPECRAG_*`` variables)
- ``build_service(settings)`` / ``build_engine(settings)``: the one composition root
- ``Service``: the front door (admission, budgets, ledger, tracing) around the engine
- ``SpeculativeRAG``: the engine; ``astream`` yields ``StageEvent``s, ``ask`` an ``Answer``
- ``Ingestor``: documents in, chunks in Chroma
- the records they hand back: ``Answer``, ``StageEvent``, ``Draft`` (``pipeline.events``),
  ``Verdict`` (defined in ``grounding.verdict``), ``Chunk``, ``Hit``, ``DocumentInfo``,
  ``FileResult``, ``IngestReport`` (``types``)

The packages follow a question through the pipeline: ``ingest`` -> ``retrieval`` ->
``generators`` (draft) -> ``grounding`` (verify) -> ``generators`` (heavy), assembled in
``pipeline``, wrapped by ``resilience`` and ``observability``, guarded by ``security``,
rendered by ``cli`` and ``ui``.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Settings": "specrag.settings", "Chunk": "specrag.types", "Hit": "specrag.types",
    "DocumentInfo": "specrag.types", "FileResult": "specrag.types",
    "IngestReport": "specrag.types", "Answer": "specrag.pipeline.events",
    "StageEvent": "specrag.pipeline.events", "Draft": "specrag.pipeline.events",
    "Verdict": "specrag.grounding.verifier", "SpeculativeRAG": "specrag.pipeline.engine",
    "Service": "specrag.pipeline.service", "build_engine": "specrag.pipeline.build",
    "build_service": "specrag.pipeline.build", "Ingestor": "specrag.ingest.ingestor",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'specrag' has no attribute '{name}'")
