"""llama-server's prompt batch sizes (``n_batch``, ``n_ubatch``) reach the server's
parameters from ``generation.options``; unset, llama.cpp's own defaults stay."""

from specrag.generators import llama_server_child
from specrag.generators.base import make_generator
from specrag.generators.factory import from_settings
from tests.support.env import make_settings


def test_batch_sizes_go_from_settings_to_the_server_parameters(tmp_path):
    s = make_settings(tmp_path, **{"generation.options": {"llama-server": {
        "n_batch": 256, "n_ubatch": 128}}})
    draft = from_settings("draft", s)  # checked against the backend's options here
    assert (draft.options["n_batch"], draft.options["n_ubatch"]) == (256, 128)
    gen = make_generator("llama-server:m", model_path="m.gguf", **draft.options)
    assert (gen.config["n_batch"], gen.config["n_ubatch"]) == (256, 128)
    _, params = llama_server_child.params(gen.config)
    assert (params.n_batch, params.n_ubatch) == (256, 128)


def test_unset_batch_sizes_keep_llama_cpps_defaults(tmp_path):
    gen = make_generator("llama-server:m", model_path="m.gguf")
    assert "n_batch" not in gen.config  # the same server key as before for the defaults
    _, params = llama_server_child.params(gen.config)
    assert (params.n_batch, params.n_ubatch) == (2048, 512)
