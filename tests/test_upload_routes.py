"""Every route Gradio serves files from keeps an upload to the session that sent it.

A small Blocks app launched with ``launch_options(settings)`` (the gate, the login) over
a real users file, signed into by two editors with raw ``httpx``. Dave uploads a file;
Bob, who knows its path, asks for it through each spelling of Gradio 6.31's file
routes (``/gradio_api/file=PATH`` and ``/gradio_api/file/PATH``, absolute, relative to
the server's working directory, or with ``..`` in it), by GET and HEAD: 404 every
time, while Dave gets his file.
"""

import os

import httpx
import pytest

from specrag.security import users as users_mod
from specrag.security.users import add_user
from tests.support.env import free_port, make_settings

pytestmark = pytest.mark.slow  # a Gradio server and bcrypt sign-ins


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    import gradio as gr

    from specrag.ui.app import launch_options

    root = tmp_path_factory.mktemp("uploads")
    rounds, users_mod.BCRYPT_ROUNDS = users_mod.BCRYPT_ROUNDS, 4  # module scope: no monkeypatch
    try:
        for name in ("bob", "dave"):
            add_user(root / "users.yaml", name, "editor", f"{name}-pw-1234")
    finally:
        users_mod.BCRYPT_ROUNDS = rounds
    settings = make_settings(root / "data", **{"security.users_file": str(root / "users.yaml")})
    with gr.Blocks() as demo:
        gr.File(file_count="multiple")
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                quiet=True, **launch_options(settings))
    yield f"http://127.0.0.1:{port}/"
    demo.close()


def _signed_in(url: str, name: str) -> httpx.Client:
    c = httpx.Client(base_url=url, timeout=30)
    assert c.post("login", data={"username": name, "password": f"{name}-pw-1234"}).is_success
    return c


def _spellings(path: str) -> list[str]:
    """Paths naming ``path``'s file; dots percent-encoded, as httpx would resolve "..".
    (a relative path is resolved by Gradio against its working directory, this one)"""
    folder, name = os.path.split(path)
    dotted = f"{folder}/%2E%2E/{os.path.basename(folder)}/{name}"
    relative = os.path.relpath(path).replace("..", "%2E%2E")
    return [f"{route}{spelling}" for route in ("gradio_api/file=", "gradio_api/file/")
            for spelling in (path, dotted, relative)]


def test_no_file_route_serves_another_sessions_upload(app):
    bob, dave = _signed_in(app, "bob"), _signed_in(app, "dave")
    up = dave.post("gradio_api/upload", files={"files": ("dave.txt", b"dave's private notes")})
    assert up.status_code == 200
    path = up.json()[0]
    for url in _spellings(path):
        for method in ("GET", "HEAD"):
            r = bob.request(method, url)
            assert r.status_code == 404, (method, url, r.status_code)
            assert b"dave's" not in r.content
    for url in _spellings(path):  # each spelling does name the file: its owner gets it
        assert dave.get(url).content == b"dave's private notes", url
