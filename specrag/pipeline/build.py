"""The one composition root: ``Settings`` in, the running pipeline out.

- ``build_verifier(settings)``: the verifier with every ``verify.*`` setting, the very
  one serving uses (calibration and the benchmarks take theirs from here).
- ``build_engine(settings, retriever=None, audit=True, telemetry=None, observers=())``:
  a ``SpeculativeRAG`` with the retriever, both tiers as resilient chains
  (``resilience.chains``: retries, failover, breakers, the local model workers), the
  verifier, the reranker, the hooks and, with ``audit``, the quality ``Auditor``, which
  scores its samples with the engine's own verifier and reranker instead of loading a
  second copy.
- ``build_service(settings, retriever=None, audit=True)``: the ``Service`` around that
  engine, which adds the usage ledger (an observer of every generation call),
  OpenTelemetry (the engine's tracer and an observer), the admission gate and the
  budgets.

The app (``ui.session``), ``specrag ask``, ``bench e2e``, ``bench concurrency`` and
``specrag calibrate`` all come through here, so what is measured is what is served.
Building is cheap: nothing loads until ``warm_up()``.

Deliberately not here: what each part does, and loading (each part's ``warm_up``).
"""

from __future__ import annotations

from specrag.grounding.crossencoder import CrossEncoder
from specrag.grounding.verifier import Verifier
from specrag.observability.audit import Auditor
from specrag.pipeline.engine import SpeculativeRAG
from specrag.pipeline.service import Service
from specrag.resilience.chains import tier_from_settings
from specrag.retrieval.retriever import Retriever
from specrag.settings import Settings


def build_verifier(settings: Settings, scorer=None):
    return Verifier.from_settings(settings, scorer=scorer)


def build_engine(settings: Settings, *, retriever=None, audit: bool = True, telemetry=None,
                 observers=()):
    s = settings
    verifier = build_verifier(s)
    reranker = CrossEncoder.from_settings(s, "reranker")
    auditor = Auditor(s, verifier=verifier, reranker=reranker) if audit else None
    return SpeculativeRAG(s, retriever=retriever or Retriever.from_settings(s),
                          draft=tier_from_settings("draft", s),
                          heavy=tier_from_settings("heavy", s), verifier=verifier,
                          reranker=reranker, auditor=auditor, telemetry=telemetry,
                          observers=observers)


def build_service(settings: Settings, *, retriever=None, audit: bool = True):
    # the service adds its ledger, telemetry and admission gate from settings, and hands
    # the first two to the engine as its hooks (``Service._assemble``: one place for them)
    engine = build_engine(settings, retriever=retriever, audit=audit)
    return Service(settings, engine)._assemble()
