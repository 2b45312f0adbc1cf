"""The one composition root: calibration, the CLI's Service and the app get the same parts."""

import pytest

from specrag.pipeline.build import build_engine, build_service, build_verifier
from tests.support.env import make_settings

# every verify.* setting away from its default, so a verifier built without them differs
VERIFY = {"verify.aggregate": "mean", "verify.per_sentence": 5, "verify.evidence_words": 32,
          "verify.threshold": 0.7, "verify.batch_size": 4}


def _config(v) -> tuple:
    return v.aggregate, v.per_sentence, v.evidence_words, v.threshold


def test_the_engine_verifier_has_every_verify_setting(tmp_path):
    s = make_settings(tmp_path, **VERIFY)
    assert _config(build_engine(s).verifier) == ("mean", 5, 32, 0.7)
    assert _config(build_verifier(s)) == ("mean", 5, 32, 0.7)
    # the int8 cross-encoder the served verifier loads runs pairs as verify.batch_size says
    scorer = build_verifier(s).warm_up().scorer
    assert (scorer.backend, scorer.batch_size, scorer.cache_size) == ("onnx-int8", 4, 0)


@pytest.mark.slow
def test_calibration_scores_with_the_verifier_serving_uses(tmp_path, monkeypatch):
    from specrag.training import calibrate, data

    s = make_settings(tmp_path, **VERIFY)
    # a small synthetic set (built by code) instead of the downloaded held-out sources
    monkeypatch.setattr(data, "verifier_pairs", lambda st, seed=0, sources=(): data.synthetic(st, seed))
    monkeypatch.setattr(calibrate, "CALIBRATION_SOURCES", ("synthetic",))
    used = []
    real = calibrate.draft_scores

    def recording(verifier, pairs, progress=False):
        used.append(verifier)
        return real(verifier, pairs, progress)

    monkeypatch.setattr(calibrate, "draft_scores", recording)
    result = calibrate.calibrate(s, 0.9, n_per_source=10, progress=False)
    assert result["drafts"] == 10 and 0.0 <= result["threshold"] <= 1.0  # at most 10 a source
    assert _config(used[0]) == _config(build_engine(s).verifier)


def test_the_cli_service_audits_with_the_engine_own_models(tmp_path):
    from specrag.pipeline.service import Service

    s = make_settings(tmp_path)
    for service in (Service(s)._assemble(), build_service(s)._assemble()):
        engine = service.engine
        assert engine.auditor is not None  # `specrag ask` audits like the app does
        assert engine.auditor.verifier is engine.verifier
        assert engine.auditor.reranker is engine.reranker
        # the service's ledger and telemetry are the engine's hooks, given as parameters
        assert engine.telemetry is service.telemetry
        assert service.ledger is not None and service.ledger in engine.observers


def test_a_session_view_shares_the_parts_and_changes_only_the_threshold(tmp_path):
    s = make_settings(tmp_path)
    service = build_service(s)._assemble()
    engine = service.engine
    view = engine.replace(settings=s.with_values(**{"verify.threshold": 0.5}))
    assert view.verifier.threshold == 0.5 and engine.verifier.threshold == s.verify.threshold
    assert view.verifier.scorer is engine.verifier.scorer  # the same (not yet loaded) model
    assert (view.retriever, view.draft, view.heavy, view.reranker, view.telemetry) == (
        engine.retriever, engine.draft, engine.heavy, engine.reranker, engine.telemetry)
    assert view.observers == engine.observers
    with pytest.raises(TypeError, match="no parameter colour"):
        engine.replace(colour="blue")
    served = service.with_engine(view)
    assert served.ledger is service.ledger and served.gate is service.gate
    assert served.engine is view and service.engine is engine


def test_the_public_api_is_exported_lazily():
    import subprocess
    import sys

    import specrag
    from specrag.pipeline.engine import SpeculativeRAG
    from specrag.pipeline.events import Answer
    from specrag.pipeline.service import Service

    assert (specrag.SpeculativeRAG, specrag.Service, specrag.Answer) == (SpeculativeRAG, Service,
                                                                        Answer)
    assert specrag.build_service is build_service and "Settings" in specrag.__all__
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        specrag.Nope  # noqa: B018
    # `import specrag` alone loads no engine, model runtime or UI (the worker process
    # and the CLI's start-up import it)
    code = ("import sys, specrag; heavy = [m for m in ('specrag.pipeline.engine', 'onnxruntime',"
            " 'gradio', 'chromadb') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
