"""The one composition root: calibration, the CLI's Service and the app get the same parts."""

import pytest

from specrag.pipeline.build import build_engine, build_service, build_verifier
from specrag.ui.session import unwrap
from tests.conftest import make_settings

# every verify.* setting away from its default, so a verifier built without them differs
VERIFY = {"verify.aggregate": "mean", "verify.per_sentence": 5, "verify.evidence_words": 32,
          "verify.threshold": 0.7}


def _config(v) -> tuple:
    return v.aggregate, v.per_sentence, v.evidence_words, v.threshold


def test_the_engine_verifier_has_every_verify_setting(tmp_path):
    s = make_settings(tmp_path, **VERIFY)
    assert _config(build_engine(s).verifier) == ("mean", 5, 32, 0.7)
    assert _config(build_verifier(s)) == ("mean", 5, 32, 0.7)


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
        assert engine.auditor.verifier is unwrap(engine.verifier)
        assert engine.auditor.reranker is unwrap(engine.reranker)
