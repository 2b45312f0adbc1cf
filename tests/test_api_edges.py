"""The endpoint's edges against real servers on loopback: big, slow and odd requests.

Each test of ``edge`` runs twice: against ``specrag serve``'s server (``create_app``
under uvicorn with ``api.server.server_config``) and against the ``/v1`` mount in a
Gradio app launched with ``launch_options(settings, demo)`` as ``app.py`` launches it.
Behind both is a ``Service`` over the real engine with fake models whose heavy tier
writes 400 words at two a second, one question at a time (``tests.support.servers``).
Requests are raw sockets where the test must misbehave (stall, lie about lengths,
leave), ``httpx`` or the ``openai`` client elsewhere. No assert is on time: where a
request must not hang, the socket's generous timeout is the bound.
"""

import json
import select
import time
from types import SimpleNamespace

import httpx
import openai
import pytest

from specrag.api import create_app
from specrag.api.app import MAX_BODY
from specrag.api.server import server_config
from specrag.generators.openai_compat import OpenAICompatGenerator
from tests.support.env import free_port
from tests.support.servers import post_head, reply, send, serve, slow_service

READ_TIMEOUT_S = 1.0
CHAT = "/v1/chat/completions"
ASK = {"model": "specrag", "messages": [{"role": "user", "content": "How fast are pages "
                                                                    "acknowledged?"}]}


def _launch_mount(settings, service) -> tuple[int, object]:
    import gradio as gr

    from specrag.ui.app import launch_options

    with gr.Blocks() as demo:
        gr.Markdown("edges")
    demo.specrag_engines = SimpleNamespace(base=service)  # what ``ui.app.build`` sets
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                quiet=True, **launch_options(settings, demo))
    return port, demo


@pytest.fixture(scope="module", params=["serve", "mount"])
def edge(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    service, heavy = slow_service(root / "data", **{
        "security.read_timeout_s": READ_TIMEOUT_S, "concurrency.max_concurrent": 1,
        "concurrency.max_queue": 0})
    settings = service.settings
    if request.param == "serve":
        app = create_app(settings, service)
        port, server = serve(server_config(app, settings, "127.0.0.1", free_port(),
                                           log_level="warning"))
        yield SimpleNamespace(port=port, service=service, heavy=heavy)
        server.should_exit = True
    else:
        port, demo = _launch_mount(settings, service)
        yield SimpleNamespace(port=port, service=service, heavy=heavy)
        demo.close()


def _until(check, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_content_length_over_the_limit_is_refused_before_the_body(edge):
    # 300 MB announced, 10 bytes sent: only a server that does not wait for the body answers
    out = reply(send(edge.port, post_head(CHAT, length=300_000_000) + b'{"model": '))
    assert out.startswith(b"HTTP/1.1 413"), out[:200]
    assert f"over {MAX_BODY} bytes".encode() in out and b"connection: close" in out.lower()


def test_a_chunked_body_is_refused_once_it_passes_the_limit(edge):
    sock = send(edge.port, post_head(CHAT, chunked=True))
    piece, sent, out = b"x" * 65536, 0, b""
    while sent < 64 * MAX_BODY:  # a server that reads it all never answers: no last chunk
        if select.select([sock], [], [], 0)[0]:
            break
        try:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += len(piece)
    out = reply(sock)
    assert out.startswith(b"HTTP/1.1 413"), out[:200]
    assert sent < 16 * MAX_BODY  # refused near the limit (plus the sockets' buffers)


def test_a_body_that_stalls_half_way_is_cut_off(edge):
    out = reply(send(edge.port, post_head(CHAT, length=200) + b'{"model": "specrag", '))
    assert out.startswith(b"HTTP/1.1 408"), out[:200]
    assert f"did not arrive within {READ_TIMEOUT_S:g} s".encode() in out


def test_a_client_that_leaves_cancels_its_plain_question(edge):
    calls, cancelled = len(edge.heavy.calls), edge.heavy.cancelled
    body = json.dumps(ASK).encode()
    sock = send(edge.port, post_head(CHAT, length=len(body)) + body)
    assert _until(lambda: len(edge.heavy.calls) > calls), "the heavy model never started"
    sock.close()  # gives up: the heavy model has ~200 s of words left
    assert _until(lambda: edge.heavy.cancelled > cancelled), "the question ran on"
    assert _until(lambda: edge.service.gate.active == 0), "its admission slot is still held"


def test_deeply_nested_json_is_a_400_in_openais_shape(edge):
    r = httpx.post(f"http://127.0.0.1:{edge.port}{CHAT}", content=b"[" * 100_000, timeout=30,
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "the request body is JSON nested too deeply"


@pytest.mark.parametrize("value", ["false", 0, "true", [], {}])
def test_stream_must_be_a_json_boolean(edge, value):
    with httpx.stream("POST", f"http://127.0.0.1:{edge.port}{CHAT}",
                      json={**ASK, "stream": value}, timeout=30) as r:
        assert r.status_code == 400  # not a stream of events (leaving it cancels the question)
        error = json.loads(r.read())["error"]
    assert error["param"] == "stream" and "must be true or false" in error["message"]


# -- specrag serve only: the server's limits on the request line and headers ----------
@pytest.fixture(scope="module")
def serve_port(tmp_path_factory):
    service, _ = slow_service(tmp_path_factory.mktemp("serve") / "data",
                              **{"security.read_timeout_s": READ_TIMEOUT_S})
    app = create_app(service.settings, service)
    port, server = serve(server_config(app, service.settings, "127.0.0.1", free_port(),
                                       log_level="warning"))
    yield port
    server.should_exit = True


def test_headers_that_stall_half_way_are_cut_off(serve_port):
    out = reply(send(serve_port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"))
    assert out.startswith(b"HTTP/1.1 408"), out[:200]
    assert reply(send(serve_port, b"")) == b""  # a silent connection is closed, unanswered


def test_headers_over_64_kib_are_refused(serve_port):
    head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 70_000 + b"\r\n\r\n"
    out = reply(send(serve_port, head))
    assert out.startswith(b"HTTP/1.1 431"), out[:200]
    ok = httpx.get(f"http://127.0.0.1:{serve_port}/v1/models", timeout=30)
    assert ok.status_code == 200 and ok.json()["data"][0]["id"] == "specrag"


def test_a_503_does_not_show_where_the_model_runs(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: the model server is down
    service, _ = slow_service(tmp_path / "data", heavy=OpenAICompatGenerator("m", url))
    app = create_app(service.settings, service)
    port, server = serve(server_config(app, service.settings, "127.0.0.1", free_port(),
                                       log_level="warning"))
    try:
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.InternalServerError) as err:
            c.chat.completions.create(**ASK)
        assert err.value.status_code == 503
        message = err.value.body["message"]
        assert "the model server" in message and "127.0.0.1" not in message, message
        with pytest.raises(openai.APIError) as streamed:  # the stream's error event
            for _ in c.chat.completions.create(**ASK, stream=True):
                pass
        message = streamed.value.message
        assert "the model server" in message and "127.0.0.1" not in message, message
    finally:
        server.should_exit = True
