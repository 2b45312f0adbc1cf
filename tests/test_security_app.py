"""The app login (``specrag.ui.auth``) against a real Gradio server, through gradio_client.

A small Blocks app wired exactly as ``app.py`` is: ``launch(**launch_options(settings))``
(the gate and the login) and ``principal=principal_from_request(request, settings)`` on
every library call, with the app's own Search tab. The rules themselves are the
library's (see test_security_access); sessions, throttling and uploads are in
test_login_gate.
"""

import asyncio

import pytest
import yaml

from specrag.security import users as users_mod
from specrag.security.access import PermissionDenied
from specrag.security.throttle import PER_PAIR
from specrag.security.users import add_user
from specrag.ui.auth import LOGIN_ATTEMPT, LoginAttempt, gradio_auth, principal_from_request
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
    from specrag.ui import search
    from specrag.ui.app import launch_options

    ing = Ingestor(secured, embedder=embedder)
    ret = Retriever(secured, embedder=embedder, store=ing.store)

    def upload(text, collection, request: gr.Request):
        who = principal_from_request(request, secured)
        try:
            report = ing.ingest_bytes([("note.txt", text.encode())], collection, principal=who)
        except PermissionDenied as err:
            return f"denied: {err}"
        return f"{who.name}: {report.results[0].status}"

    def who(request):
        try:
            return principal_from_request(request, secured)
        except PermissionDenied as err:
            raise gr.Error(str(err)) from None

    with gr.Blocks() as demo:
        text, collection, out = gr.Textbox(), gr.Textbox(), gr.Textbox()
        gr.Button("up").click(upload, [text, collection], out, api_name="ingest")
        search.build_tab(ret, collection, 10, gr, who)  # the app's /search
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                quiet=True, **launch_options(secured))
    yield f"http://127.0.0.1:{port}/"
    demo.close()


def test_login_and_roles_through_gradio_client(app_url):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

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
    status, hits = carol.predict("reception", "public", 3, api_name="/search")
    assert status.startswith("1 chunks") and hits["data"][0][5].startswith("Visitors")
    # a refusal is an error with the plain message, not a status line that looks like a result
    with pytest.raises(AppError, match=r"^user 'carol' \(viewer\) may not read or search "
                                       r"collection 'secret'$"):
        carol.predict("salaries", "secret", 3, api_name="/search")
    for query, k, message in [("", 3, "type a question or keywords"),
                              ("x" * 2001, 3, "the question is too long \\(2,001 characters"),
                              ("reception", 0, "less than minimum value 1")]:
        with pytest.raises(AppError, match=message):
            carol.predict(query, "public", k, api_name="/search")


def test_single_user_mode_has_no_login(settings):
    assert gradio_auth(settings) is None
    assert principal_from_request(None, settings).name == "local"


def _sign_in(check, name, password, address="10.0.0.1"):
    """What Gradio's /login does with the auth callable, inside the gate's context."""
    async def attempt():
        token = LOGIN_ATTEMPT.set(LoginAttempt(address))
        try:
            return await check(name, password)
        finally:
            LOGIN_ATTEMPT.reset(token)

    return asyncio.run(attempt())


def test_repeated_wrong_passwords_lock_the_name_at_that_address_only(secured):
    from fastapi import HTTPException

    check = gradio_auth(secured)
    assert _sign_in(check, "bob", "bob-pw-1234")
    for _ in range(int(PER_PAIR.capacity)):
        assert not _sign_in(check, "bob", "guess")
    with pytest.raises(HTTPException) as refused:  # even the right password, for now
        _sign_in(check, "bob", "bob-pw-1234")
    assert refused.value.status_code == 429 and int(refused.value.headers["Retry-After"]) > 0
    assert _sign_in(check, "carol", "carol-pw-123")  # other names are not affected
    assert _sign_in(check, "bob", "bob-pw-1234", address="10.0.0.2")  # nor bob elsewhere


def test_without_the_gate_the_login_refuses(secured):
    assert not asyncio.run(gradio_auth(secured)("bob", "bob-pw-1234"))
