"""Shared fixtures: offline environment, a model cache shared across tests, a Chroma server.

Fast and slow suites: ``pytest -m "not slow"`` runs no real model and no server; ``pytest
-m slow`` runs the rest. A test is ``slow`` when it says so, when it is marked ``server``
or ``browser``, or when it uses a fixture of ``SLOW_FIXTURES`` (directly or through
another fixture): those load the real embedder or start a Chroma server.
"""

from __future__ import annotations

import os

for _k, _v in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
               "ANONYMIZED_TELEMETRY": "False",
               "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ.setdefault(_k, _v)

import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

import specrag.testing  # noqa: E402,F401 - registers the "fake" generator backend
from specrag.settings import Settings  # noqa: E402
from tests.support.env import free_port, make_settings  # noqa: E402

# fixtures that load a real model or start a server: any test that needs one is slow
SLOW_FIXTURES = frozenset({"embedder", "ingestor", "chroma_server"})
SLOW_MARKERS = frozenset({"server", "browser"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if (SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
                or any(m.name in SLOW_MARKERS for m in item.iter_markers())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return make_settings(tmp_path / "data")


@pytest.fixture(scope="session")
def embedder():
    from specrag.retrieval.embedder import Embedder

    return Embedder(make_settings("/nonexistent-unused")).warm_up()


# tiny random GGUFs carrying the real draft's tokenizer (``tests.support.tiny_gguf``), for
# the weight and distillation tests: written once per run
def _tiny_gguf(tmp_path_factory, name: str, arch: str):
    from specrag import sources
    from tests.support.tiny_gguf import write_tiny_qwen2

    real = sources.resolve("draft", make_settings(tmp_path_factory.mktemp("draft")))
    return write_tiny_qwen2(real, tmp_path_factory.mktemp("tiny") / name, arch=arch)


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    return _tiny_gguf(tmp_path_factory, "tiny.gguf", "qwen2")


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    return _tiny_gguf(tmp_path_factory, "llama.gguf", "llama")


@pytest.fixture
def ingestor(settings, embedder):
    from specrag.ingest.ingestor import Ingestor

    return Ingestor(settings, embedder=embedder)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A real ``chroma run`` server on loopback for the HttpClient path."""
    port = free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    exe = Path(sys.executable).parent / "chroma"
    log = open(path / "server.log", "wb")
    proc = subprocess.Popen([str(exe), "run", "--path", str(path / "db"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/api/v2/heartbeat", timeout=1)
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError((path / "server.log").read_text()[-2000:])
            time.sleep(0.3)
    else:
        proc.kill()
        raise RuntimeError("chroma server did not start in 60 s")
    yield url
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


@pytest.fixture
def api():
    """A local server speaking the Anthropic Messages API and the OpenAI chat API."""
    from specrag.testing.mockapi import MockAPI

    with MockAPI() as server:
        yield server


@pytest.fixture
def claude(api, monkeypatch):
    """The real Anthropic SDK backend pointed at ``api``."""
    from specrag.generators.anthropic_backend import AnthropicGenerator

    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-test-123")
    return AnthropicGenerator("claude-sonnet-4-6", api_key_env="TEST_ANTHROPIC_KEY",
                              base_url=api.url, timeout_s=5)
