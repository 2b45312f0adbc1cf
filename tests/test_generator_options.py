"""Every backend option is reachable from settings (``generation.options``) and checked:
an option a backend does not take is an error that names it, never silently dropped."""

import pytest

from specrag.generators.base import check_options, make_generator
from specrag.generators.factory import from_settings
from specrag.resilience.chains import tier_from_settings
from tests.support.env import make_settings


def test_an_unknown_option_is_an_error_naming_it(tmp_path):
    s = make_settings(tmp_path, **{"generation.options": {"llama-server": {"n_ctxx": 8192}}})
    with pytest.raises(ValueError, match=r"'llama-server' has no option 'n_ctxx'; it takes: .*n_ctx"):
        from_settings("draft", s)
    # options written for the runtime of earlier releases reach the server engine, checked
    s = make_settings(tmp_path, **{"generation.draft": "llama-cpp",
                                   "generation.options": {"llama-cpp": {"n_ctxx": 8192}}})
    with pytest.raises(ValueError, match=r"'llama-server' has no option 'n_ctxx'; it takes: .*n_ctx"):
        from_settings("draft", s)
    with pytest.raises(ValueError, match="has no option 'retries'"):
        make_generator("openai:m", retries=3)
    check_options("openai", {"timeout_s": 3})  # a real one passes


def test_load_in_8bit_reaches_the_transformers_loading_call(tmp_path):
    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    s = make_settings(tmp_path, **{
        "generation.draft": "transformers", "models.draft": str(model_dir),
        "generation.options": {"transformers": {"load_in": "8bit", "device": "cpu"}}})
    gen = from_settings("draft", s).build()  # the backend, nothing loaded
    assert gen.name == "transformers" and gen.model_path == str(model_dir)
    kwargs = gen.load_kwargs()  # what from_pretrained receives
    assert kwargs["quantization_config"].load_in_8bit is True
    assert kwargs["quantization_config"].load_in_4bit is False and kwargs["device_map"] == "cpu"
    with pytest.raises(ValueError, match="load_in must be one of"):
        make_generator("transformers:x", load_in="3bit")


def test_llama_server_options_reach_the_server_process(tmp_path):
    s = make_settings(tmp_path, **{"generation.threads": 1, "generation.parallel": 3,
                                   "generation.options": {"llama-server": {"n_ctx": 2048,
                                                                           "logprobs": False}}})
    draft = from_settings("draft", s)
    assert draft.name == "llama-server" and draft.options["role"] == "draft"
    gen = draft.build()  # the backend, its model file resolved, no process yet
    assert gen.config["n_ctx"] == 2048 and gen.config["threads"] == 1
    assert gen.config["parallel"] == 3 and gen.logprobs is False
    assert gen.config["model_path"].endswith(".gguf") and gen._server is None


def test_the_earlier_runtime_name_and_its_options_reach_the_server_engine(tmp_path, caplog,
                                                                         monkeypatch):
    from specrag.generators import base

    monkeypatch.setattr(base, "_warned", set())  # said once a process: here, in this test
    s = make_settings(tmp_path, **{
        "generation.draft": "llama-cpp",
        "generation.heavy": "openai:backup", "generation.threads": 1,
        "generation.options": {"llama-cpp": {"n_ctx": 2048, "logprobs": False},
                               "openai": {"timeout_s": 7.5}}})
    draft = from_settings("draft", s)
    assert draft.name == "llama-server" and "is now 'llama-server'" in caplog.text
    assert draft.options["n_ctx"] == 2048 and draft.options["threads"] == 1
    assert draft.build().logprobs is False  # token confidence off reaches the backend
    assert draft.options["role"] == "draft" and draft.build().config["n_ctx"] == 2048
    heavy = tier_from_settings("heavy", s).members[0].inner  # chain -> retries -> backend
    assert heavy.name == "openai" and heavy.timeout_s == 7.5


def test_options_come_from_the_settings_file_and_the_environment(tmp_path):
    from specrag.settings import Settings

    cfg = tmp_path / "specrag.yaml"
    cfg.write_text("generation:\n  options:\n    transformers: {load_in: 4bit}\n")
    s, origins = Settings.load(str(cfg), env={
        "SPECRAG_GENERATION__OPTIONS": '{"llama-cpp": {"n_ctx": 8192}}'})
    assert s.generation.options == {"llama-cpp": {"n_ctx": 8192}}  # the environment wins
    assert origins["generation.options"] == "env:SPECRAG_GENERATION__OPTIONS"
    s, origins = Settings.load(str(cfg), env={})
    assert s.generation.options == {"transformers": {"load_in": "4bit"}}
    assert origins["generation.options"] == f"file:{cfg}"


def test_the_fake_backend_exists_only_where_test_support_is_imported():
    import subprocess
    import sys

    from specrag.generators.base import is_local_backend

    # the app and the CLI never import specrag.testing: "fake" is no backend there
    out = subprocess.run([sys.executable, "-c",
                          "from specrag.generators.base import make_generator\n"
                          "make_generator('fake:x')"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "unknown generator backend 'fake'" in out.stderr
    # one notion of "local" for costs, retries and breakers, declared by each backend
    assert [is_local_backend(b) for b in ("llama-server", "llama-cpp", "transformers", "fake",
                                          "openai", "anthropic", "nope")] == [True] * 4 + [False] * 3


def test_two_local_models_generating_at_once_split_the_cores(tmp_path):
    from specrag.generators.factory import backend_options, local_threads

    both = {"generation.draft": "llama-server", "generation.heavy": "llama-server"}
    assert local_threads(make_settings(tmp_path, **both), cores=8) is None  # one at a time
    concurrent = make_settings(tmp_path, **both, **{"generation.eager_heavy_local": True})
    assert local_threads(concurrent, cores=8) == 4 and local_threads(concurrent, cores=1) == 1
    assert backend_options("llama-server", concurrent, "heavy")["threads"] == local_threads(concurrent)
    remote_heavy = make_settings(tmp_path, **{"generation.heavy": "anthropic:claude-sonnet-4-6",
                                              "generation.eager_heavy_local": True})
    assert local_threads(remote_heavy, cores=8) is None  # Claude takes no cores here
    pinned = make_settings(tmp_path, **both, **{"generation.eager_heavy_local": True,
                                                "generation.threads": 3})
    assert local_threads(pinned, cores=8) == 3
