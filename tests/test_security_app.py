"""The app login (``specrag.ui.auth``) against a real Gradio server, through gradio_client.

A small Blocks app wired exactly as the README tells ``app.py`` to be wired: ``launch(auth=
gradio_auth(settings))`` and ``principal=principal_from_request(request, settings)`` on every
library call. The rules themselves are the library's (see test_security_access).
"""

import pytest
import yaml

from specrag.security import users as users_mod
from specrag.security.access import PermissionDenied
from specrag.security.users import add_user
from specrag.ui.auth import gradio_auth, principal_from_request
from tests.support.env import free_port, make_settings

pytestmark = pytest.mark.slow


@pytest.fixture
def secured(tmp_path, monkeypatch):
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 4)
    path = tmp_path / "users.yaml"
    add_user(path, "bob", "editor", "bob-pw-1234")
    add_user(path, "carol", "viewer", "carol-pw-123")
    data = yaml.safe_load(path.read_text())
    data["collections"] = {"public": {"read": ["*"], "write": ["editor"]}}
    path.write_text(yaml.safe_dump(data))
    return make_settings(tmp_path / "data", **{"security.users_file": str(path)})


@pytest.fixture
def app_url(secured, embedder):
    # no `from __future__ import annotations` here: Gradio must see gr.Request as a type
    import gradio as gr

    from specrag.ingest.ingestor import Ingestor
    from specrag.retrieval.retriever import Retriever

    ing = Ingestor(secured, embedder=embedder)
    ret = Retriever(secured, embedder=embedder, store=ing.store)

    def upload(text, collection, request: gr.Request):
        who = principal_from_request(request, secured)
        try:
            report = ing.ingest_bytes([("note.txt", text.encode())], collection, principal=who)
        except PermissionDenied as err:
            return f"denied: {err}"
        return f"{who.name}: {report.results[0].status}"

    def search(query, collection, request: gr.Request):
        who = principal_from_request(request, secured)
        try:
            hits = ret.retrieve(query, 3, collection, principal=who).hits
        except PermissionDenied as err:
            return f"denied: {err}"
        return hits[0].chunk.text if hits else "no hits"

    with gr.Blocks() as demo:
        text, collection, out = gr.Textbox(), gr.Textbox(), gr.Textbox()
        gr.Button("up").click(upload, [text, collection], out, api_name="ingest")
        gr.Button("search").click(search, [text, collection], out, api_name="search")
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                quiet=True, auth=gradio_auth(secured))
    yield f"http://127.0.0.1:{port}/"
    demo.close()


def test_login_and_roles_through_gradio_client(app_url):
    from gradio_client import Client

    with pytest.raises(Exception):
        Client(app_url, auth=("carol", "wrong-password"), verbose=False)
    with pytest.raises(Exception):
        Client(app_url, verbose=False)  # no login: the API is closed too

    bob = Client(app_url, auth=("bob", "bob-pw-1234"), verbose=False)
    assert bob.predict("Visitors sign in at reception.", "public", api_name="/ingest") == \
        "bob: added"
    carol = Client(app_url, auth=("carol", "carol-pw-123"), verbose=False)
    denied = carol.predict("Carol's note.", "public", api_name="/ingest")
    assert denied.startswith("denied:") and "(viewer) may not add" in denied
    assert carol.predict("reception", "public", api_name="/search").startswith("Visitors")
    assert "may not read" in carol.predict("salaries", "secret", api_name="/search")


def test_single_user_mode_has_no_login(settings):
    assert gradio_auth(settings) is None
    assert principal_from_request(None, settings).name == "local"


def test_repeated_wrong_passwords_lock_the_name(secured, monkeypatch):
    from specrag.ui import auth

    check = gradio_auth(secured)
    assert check("bob", "bob-pw-1234")
    for _ in range(auth.MAX_FAILURES):
        assert not check("bob", "guess")
    assert not check("bob", "bob-pw-1234")  # locked even with the right password
    assert check("carol", "carol-pw-123")  # other names are not affected
    monkeypatch.setattr(auth, "LOCKOUT_S", 0.0)
    fresh = gradio_auth(secured)
    assert fresh("bob", "bob-pw-1234")
