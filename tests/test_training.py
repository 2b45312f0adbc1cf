"""Training data rules (fast) and a tiny end-to-end training run (slow)."""

import json
import random
import shutil

import pytest

from specrag.training.data import Pair, perturb, qa_claim, sample, split_of


def test_split_is_stable_and_roughly_80_10_10():
    keys = [f"k{i}" for i in range(5000)]
    splits = [split_of(k) for k in keys]
    assert splits == [split_of(k) for k in keys]
    assert 0.07 < splits.count("test") / 5000 < 0.13 and 0.07 < splits.count("dev") / 5000 < 0.13


def test_qa_claim_uses_one_template_and_lengths_are_matched():
    from specrag.training.data import length_matched

    q = "What nationality was James Henry Miller's wife?"
    assert qa_claim(q, "American") == \
        "The answer to \"What nationality was James Henry Miller's wife?\" is: American."
    rows = [("c", "q", "Paris", "It was Lyon."), ("c", "q", "Big Ben", "London"),
            ("c", "q", "1889", "Rome")]
    got = length_matched(rows)
    assert sorted((len(a.split()), lab) for _, _, a, lab in got) == [(1, 0.0), (1, 0.0), (1, 1.0), (1, 1.0)]


def test_perturb_changes_the_sentence():
    rng = random.Random(0)
    s = "The bridge opened in 1932 and carried 40,000 cars a day across the river."
    for _ in range(20):
        changed, kind = perturb(s, ["Madrid", "Lisbon"], rng)
        assert changed != s and kind in ("year", "number", "entity", "negation")


def test_sample_is_label_balanced_and_split_pure():
    pairs = [Pair("p", f"h{i}", float(i % 3 == 0), "x", "train" if i % 5 else "test")
             for i in range(300)]
    got = sample(pairs, "train", {"x": 100}, seed=1)
    assert len(got) == 100 and sum(p.label for p in got) == 50
    assert all(p.split == "train" for p in got)


def test_rte_and_cb_are_read_as_test_only_nli_checks(settings):
    pytest.importorskip("pyarrow")
    from specrag.training.data import nli_checks

    pairs = nli_checks(settings)
    by = {name: [p for p in pairs if p.source == name] for name in ("rte", "cb")}
    assert len(by["rte"]) == 277 and len(by["cb"]) == 56
    assert all(p.split == "test" for p in pairs)
    # RTE label 0 is entailment: the first validation pair is labelled not_entailment
    assert by["rte"][0].hypothesis == "Christopher Reeve had an accident." and by["rte"][0].label == 0.0
    assert 0 < sum(p.label for p in by["cb"]) < len(by["cb"])


def test_reranker_curriculum_uses_other_questions_passages():
    from specrag.training.rerank_data import RerankItem, easy_pairs, training_pairs

    items = [RerankItem("d", f"q{i}", f"gold{i}", tuple([f"gold{i}"] + [f"c{i}-{j}" for j in range(9)]),
                        "train") for i in range(6)]
    easy = easy_pairs(items, negatives=3, seed=0)
    assert [p for p in easy if p[2] == 1.0] == [(f"q{i}", f"gold{i}", 1.0) for i in range(6)]
    for q, passage, label in easy:
        if label == 0.0:  # never one of the question's own candidates
            assert not passage.startswith(("gold" + q[1:], f"c{q[1:]}-"))
    hard = training_pairs(items, negatives=3, seed=0)
    assert sum(p[2] == 0.0 for p in hard) == 18
    assert all(p[1].startswith(f"c{p[0][1:]}-") for p in hard if p[2] == 0.0)


@pytest.mark.slow
def test_tiny_training_run_end_to_end(settings, tmp_path):
    from specrag.grounding.crossencoder import CrossEncoder
    from specrag.training import run
    from specrag.training.sources import work_dir

    # without VitaminC: the index this runs against no longer lists BIG-bench 1.0.0
    out = run.train_verifier(settings, out=tmp_path / "verifier", scale=0.003, progress=False,
                             evaluate=False, without=("vitaminc",))
    # its fp32 twin (~260 MB) goes to the shared cache, one folder per --out: not reused
    shutil.rmtree(work_dir(settings, "verifier", out), ignore_errors=True)
    meta = json.loads((out / "specrag.json").read_text())
    assert meta["train_config"]["seed"] == 0 and meta["without"] == ["vitaminc"]
    # the record lists only what was read: no BIG-bench, no VitaminC pairs
    assert "bigbench" not in meta["data"] and "halueval" in meta["data"]
    assert set(meta["train_pairs"]) == set(run.VERIFIER_TRAIN) - {"vitaminc"}
    assert "Left out (`--without`): vitaminc" in (out / "README.md").read_text()
    from specrag.training.train import resolve_precision  # what "auto" means on this machine
    assert meta["train_stats"]["precision"] == resolve_precision("auto", "cpu")
    assert (out / "model-int8.onnx").exists() and (out / "README.md").exists()
    scores = CrossEncoder(settings, "verifier", model=str(out)).predict([("a b c", "a b")])
    assert scores.shape == (1,) and 0 <= scores[0] <= 1


@pytest.mark.slow
def test_a_shipped_int8_verifier_is_recovered_for_further_training(settings, tmp_path):
    import numpy as np
    import torch

    from specrag import sources
    from specrag.grounding.crossencoder import CrossEncoder
    from specrag.training import run
    from specrag.training.from_onnx import load_scorer
    from specrag.training.sources import work_dir

    shipped = sources.resolve("verifier", settings)
    model, tok = load_scorer(shipped, sources.resolve("embedder", settings))
    pairs = [("The tower was designed by Karl Brenner in 1889.", "Karl Brenner designed the tower."),
             ("The tower was designed by Karl Brenner in 1889.", "Gustave Eiffel designed it."),
             ("Employees receive 25 days of paid leave.", "Staff get 25 days of leave.")]
    enc = tok([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
    with torch.no_grad():
        recovered = torch.sigmoid(model.eval()(**enc).squeeze(-1)).numpy()
    int8 = CrossEncoder(settings, "verifier").predict(pairs)
    assert np.abs(recovered - int8).max() < 0.05  # dequantized weights: the same model
    # and a continued run starts from it: its first loss is the trained model's, not ln 2
    out = run.train_verifier(settings, out=tmp_path / "continued", scale=0.003, progress=False,
                             evaluate=False, init=shipped, without=("vitaminc",))
    shutil.rmtree(work_dir(settings, "verifier", out), ignore_errors=True)
    meta = json.loads((out / "specrag.json").read_text())
    assert meta["init"]["sha256"] == sources.sha256_file(shipped / "model-int8.onnx")
    assert meta["without"] == ["vitaminc"] and "bigbench" not in meta["data"]
    assert "vitaminc" not in meta["train_pairs"]
    assert meta["train_config"]["lr"] == run.CONTINUE_CONFIG["lr"] and meta["curriculum_pairs"] == {
        "synthetic": 0, "halueval-qa": 0}
    assert meta["train_stats"]["final_loss_ema"] < 0.6  # a cold start sits at ln 2 = 0.69


def test_auto_precision_picks_bf16_only_where_the_hardware_has_it():
    from specrag.training.train import cpu_has_bf16, resolve_precision

    zen4 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
    zen3 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n"
    sapphire = "flags\t\t: avx512f amx_bf16 amx_tile amx_int8\n"
    assert cpu_has_bf16(zen4) and cpu_has_bf16(sapphire) and not cpu_has_bf16(zen3)
    assert resolve_precision("auto", "cpu", zen4) == "bf16"
    assert resolve_precision("auto", "cpu", zen3) == "fp32"  # emulated bf16 is slower
    assert resolve_precision("auto", "cuda", zen3) == "bf16"
    assert resolve_precision("fp32", "cpu", zen4) == "fp32"  # an explicit choice is kept
    with pytest.raises(ValueError, match="unknown training precision"):
        resolve_precision("fp16", "cpu", zen4)


def _index(pages: dict):
    """A tiny PEP 503 index on loopback serving ``pages`` (path -> bytes); yields its URL and
    the paths asked for."""
    import http.server
    import threading

    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            asked.append(self.path)
            body = pages.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/simple", asked


@pytest.fixture
def offline_bigbench(settings, tmp_path, monkeypatch):
    """Settings with an empty training cache, no local sdist, loopback bypassing proxies."""
    monkeypatch.delenv("SPECRAG_BIGBENCH_SDIST", raising=False)
    for k in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(k, "127.0.0.1")
    return settings.with_values(cache_dir=str(tmp_path / "cache"))


def test_an_index_without_bigbench_1_0_0_says_to_pass_without_vitaminc(offline_bigbench,
                                                                        monkeypatch):
    from specrag.training import sources
    from specrag.types import ModelUnavailable

    page = b'<a href="../../packages/bigbench-0.0.1.tar.gz#sha256=00">bigbench-0.0.1.tar.gz</a>'
    server, url, asked = _index({"/simple/bigbench/": page})
    monkeypatch.setattr(sources, "INDEX", url)
    try:
        with pytest.raises(ModelUnavailable) as err:
            sources.vitaminc_path(offline_bigbench, timeout=10)
    finally:
        server.shutdown()
    assert asked == ["/simple/bigbench/"]  # the index was read, nothing downloaded
    msg = str(err.value)
    assert "bigbench-1.0.0.tar.gz is not listed" in msg and "--without vitaminc" in msg
    assert "SPECRAG_BIGBENCH_SDIST" in msg and sources.BIGBENCH["sha256"] in msg


def test_a_listed_sdist_is_downloaded_and_refused_when_its_sha256_differs(offline_bigbench,
                                                                         monkeypatch):
    from specrag.training import sources
    from specrag.types import ModelUnavailable

    # a relative href, as PEP 503 allows: resolved against the index page
    page = b'<a href="../../files/bigbench-1.0.0.tar.gz#sha256=1bb3">bigbench-1.0.0.tar.gz</a>'
    server, url, asked = _index({"/simple/bigbench/": page,
                                 "/files/bigbench-1.0.0.tar.gz": b"not the pinned archive"})
    monkeypatch.setattr(sources, "INDEX", url)
    try:
        with pytest.raises(ModelUnavailable, match="refusing to use it.*--without vitaminc"):
            sources.vitaminc_path(offline_bigbench, timeout=10)
    finally:
        server.shutdown()
    assert asked == ["/simple/bigbench/", "/files/bigbench-1.0.0.tar.gz"]
    # a local copy that is not there is an error too, not a silent download
    missing = offline_bigbench.cache_path / "missing.tar.gz"
    monkeypatch.setenv("SPECRAG_BIGBENCH_SDIST", str(missing))
    with pytest.raises(ModelUnavailable, match="is not a file.*--without vitaminc"):
        sources.vitaminc_path(offline_bigbench, timeout=10)


def test_leaving_vitaminc_out_drops_its_sets_and_an_unknown_name_is_rejected(settings):
    from specrag.training import calibrate, data, run

    every = data.SOURCES + data.HARD
    assert data.kept(every, ("vitaminc",)) == tuple(
        s for s in every if s not in ("vitaminc", "counterfactual-vitc"))
    assert data.kept(every) == every
    assert data.kept(every, "vitaminc") == data.kept(every, ["vitaminc"])
    assert data.left_out(["vitaminc", "noisy", "vitaminc"]) == ["vitaminc", "noisy"]
    assert "bigbench" in run.data_versions() and "bigbench" not in run.data_versions(["vitaminc"])
    # rejected before any data is read or model loaded (so these return at once)
    for call in (lambda: data.kept(every, ("vitamin-c",)),
                 lambda: run.train_verifier(settings, without=("vitaminc", "vitamin-c")),
                 lambda: run.train_reranker(settings, without=("bigbench",)),
                 lambda: run.train_head(settings, without=("vitamin-c",)),
                 lambda: calibrate.calibrate(settings, without=("vitamin-c",))):
        with pytest.raises(ValueError, match=r"to leave out: .*\(known: vitaminc, halueval-qa"):
            call()
