"""The endpoint's routes mounted in a Gradio app, and single-user mode (no users file).

The app launched as ``app.py`` launches it (``build``, then ``launch_options(settings,
demo)``: the gate, the upload limit and the ``/v1`` routes), over the sample handbook with fake models that write one word per 50 ms. Through that app's port the
official ``openai`` client must get a live stream (chunks while the models write, not
all at the end, so no middleware buffers it), the ``specrag`` alias of the default
collection, and, with no users file, answers on loopback but a 401 for a request that
came through a proxy.
"""

import time

import openai
import pytest

from specrag.ingest.ingestor import Ingestor
from tests.support.env import ROOT, free_port, make_settings
from tests.support.fakes import DRAFT_WRONG, HEAVY_ANSWER, handbook_engine

pytestmark = pytest.mark.slow

HARD = "What am I paid for on-call work on a public holiday?"
WORD_S = 0.05


@pytest.fixture(scope="module")
def app_url(tmp_path_factory, embedder):
    from specrag.ui.app import build, launch_options

    root = tmp_path_factory.mktemp("openai-mount")
    settings = make_settings(root / "data", **{"store.collection": "handbook"})
    Ingestor(settings, embedder=embedder).ingest([ROOT / "assets" / "handbook"])
    engine = handbook_engine(settings, embedder, WORD_S, WORD_S)
    demo = build(settings, engine=engine, sample=False)
    options = launch_options(settings, demo)  # exactly as app.py launches the app
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                quiet=True, **options)
    yield f"http://127.0.0.1:{port}"
    demo.close()


def test_the_stream_is_live_through_the_gradio_app(app_url):
    c = openai.OpenAI(base_url=app_url + "/v1", api_key="unused-on-loopback", max_retries=0)
    t0 = time.perf_counter()
    arrivals, content = [], []
    for chunk in c.chat.completions.create(model="specrag", stream=True,
                                           messages=[{"role": "user", "content": HARD}]):
        arrivals.append(time.perf_counter() - t0)
        content += [ch.delta.content or "" for ch in chunk.choices]
    assert "".join(content) == HEAVY_ANSWER
    words = len(DRAFT_WRONG.split()) + len(HEAVY_ANSWER.split())
    assert arrivals[-1] > words * WORD_S  # the fake models took this long ...
    assert arrivals[2] < arrivals[-1] / 3  # ... and the first tokens came while they wrote
    assert len(arrivals) > words  # one chunk per token, not one block


def test_single_user_mode_serves_loopback_only(app_url):
    local = openai.OpenAI(base_url=app_url + "/v1", api_key="x", max_retries=0)
    assert [m.id for m in local.models.list()] == ["specrag", "specrag:handbook"]
    proxied = openai.OpenAI(base_url=app_url + "/v1", api_key="x", max_retries=0,
                            default_headers={"X-Forwarded-For": "203.0.113.9"})
    with pytest.raises(openai.AuthenticationError) as err:
        proxied.models.list()
    assert "loopback" in err.value.message


def test_gradio_still_serves_its_own_routes(app_url):
    import urllib.request

    with urllib.request.urlopen(app_url + "/config", timeout=10) as r:
        assert r.status == 200
