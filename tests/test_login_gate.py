"""The login, sessions and uploads through specrag's gate, against a real Gradio server.

A small Blocks app launched with ``launch_options(settings)`` exactly as ``app.py`` does
(the gate, the async bcrypt login, ``max_file_size``), plus a throttle whose clock the
test moves. Clients are ``gradio_client`` and raw ``httpx``; a second client address
is 127.0.0.2 (Linux routes all of 127/8 to the loopback), so "another machine" is real.
"""

import os
import statistics
import subprocess
import sys
import threading
import time

import httpx
import pytest
import yaml

from specrag.security import users as users_mod
from specrag.security.throttle import Bucket, LoginThrottle
from specrag.security.users import add_user, remove_user
from tests.support.env import ROOT, free_port, make_settings

pytestmark = pytest.mark.slow


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def users_file(tmp_path, monkeypatch):
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 4)
    path = tmp_path / "users.yaml"
    for name, role in (("bob", "editor"), ("dave", "editor"), ("carol", "viewer")):
        add_user(path, name, role, f"{name}-pw-1234")
    return path


def start(users_file, tmp_path, throttle=None, **values):
    # no `from __future__ import annotations` here: Gradio must see gr.Request as a type
    import gradio as gr

    from specrag.ui.app import launch_options
    from specrag.ui.auth import gradio_auth, principal_from_request
    from specrag.ui.gate import claim_uploads

    settings = make_settings(tmp_path / "data", **{"security.users_file": str(users_file)},
                             **values)

    def whoami(text, request: gr.Request):
        try:
            return principal_from_request(request, settings).name
        except Exception as err:  # noqa: BLE001 - the test reads the message
            raise gr.Error(str(err)) from None

    def take(files, request: gr.Request):
        return [os.path.basename(p) for p in claim_uploads(files, request, settings)]

    with gr.Blocks() as demo:
        text, files, out = gr.Textbox(), gr.File(file_count="multiple"), gr.Textbox()
        gr.Button("who").click(whoami, text, out, api_name="whoami")
        gr.Button("take").click(take, files, out, api_name="take")
    options = launch_options(settings)
    if throttle is not None:
        options["auth"] = gradio_auth(settings, throttle)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                quiet=True, **options)
    return demo, f"http://127.0.0.1:{port}/"


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def app(users_file, tmp_path, clock):
    demo, url = start(users_file, tmp_path, LoginThrottle(clock=clock),
                      **{"chunking.max_file_mb": 0.01})
    yield url
    demo.close()


def client(url, name, password=None):
    from gradio_client import Client

    return Client(url, auth=(name, password or f"{name}-pw-1234"), verbose=False)


def login(url, name, password, address="127.0.0.1"):
    with httpx.Client(transport=httpx.HTTPTransport(local_address=address)) as c:
        return c.post(url + "login", data={"username": name, "password": password})


def call(url, cookies, api, data) -> tuple[str, str]:
    """``(event, data)`` of one REST call (``/gradio_api/call``): file paths go as they
    are, where ``gradio_client`` would upload the local file again under its own session."""
    with httpx.Client(cookies=cookies, timeout=60) as c:
        event_id = c.post(f"{url}gradio_api/call/{api}", json={"data": data}).json()["event_id"]
        lines = c.get(f"{url}gradio_api/call/{api}/{event_id}").text.splitlines()
    event = next(line.split(": ", 1)[1] for line in lines if line.startswith("event: "))
    return event, next(line.split(": ", 1)[1] for line in lines if line.startswith("data: "))


def test_a_new_password_ends_the_old_sessions(app, users_file):
    from gradio_client.exceptions import AppError

    bob, carol = client(app, "bob"), client(app, "carol")
    assert bob.predict("", api_name="/whoami") == "bob"
    assert carol.predict("", api_name="/whoami") == "carol"
    add_user(users_file, "bob", "editor", "bob-new-pw-99")  # a reset
    # remove, then add again: the report's exact sequence (her old cookie read hr)
    remove_user(users_file, "carol")
    add_user(users_file, "carol", "viewer", "carol-pw-1234")  # even the same password
    for old in (bob, carol):
        with pytest.raises((AppError, httpx.HTTPStatusError, ValueError)):
            old.predict("", api_name="/whoami")
        assert httpx.get(app + "config", cookies=old.cookies).status_code == 401
    assert client(app, "bob", "bob-new-pw-99").predict("", api_name="/whoami") == "bob"
    assert client(app, "carol").predict("", api_name="/whoami") == "carol"


def test_users_logout_ends_every_session_of_that_user_only(app, users_file):
    first, second, dave = client(app, "bob"), client(app, "bob"), client(app, "dave")
    out = subprocess.run([sys.executable, "-m", "specrag", "users", "logout", "bob",
                          "--file", str(users_file), "--json"], cwd=ROOT, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0 and '"logged_out": true' in out.stdout, out.stderr
    assert yaml.safe_load(users_file.read_text())["users"]["bob"]["session_epoch"] == 1
    for old in (first, second):
        assert httpx.get(app + "config", cookies=old.cookies).status_code == 401
    assert dave.predict("", api_name="/whoami") == "dave"
    assert client(app, "bob").predict("", api_name="/whoami") == "bob"  # may sign in again


def test_failures_per_address_and_name_trip_then_decay(app, clock):
    for _ in range(5):
        assert login(app, "bob", "guess-guess").status_code == 400
    r = login(app, "bob", "bob-pw-1234")  # the right password, but not now
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
    assert "too many failed sign-ins" in r.json()["detail"]
    assert login(app, "dave", "dave-pw-1234").status_code == 200  # other names: fine
    clock.now += 61  # one failure has leaked away
    assert login(app, "bob", "bob-pw-1234").status_code == 200


def test_a_stranger_cannot_lock_a_user_out(app):
    for _ in range(12):  # 127.0.0.2 hammers bob until it is refused
        last = login(app, "bob", "guess-guess", address="127.0.0.2")
    assert last.status_code == 429
    started = time.monotonic()
    assert login(app, "bob", "bob-pw-1234").status_code == 200  # bob, from his own address
    assert time.monotonic() - started < 5  # at most the soft per-name slow-down


def test_uploads_belong_to_the_session_that_sent_them(app, tmp_path):
    from gradio_client import handle_file

    bob, dave, carol = client(app, "bob"), client(app, "dave"), client(app, "carol")
    mine = httpx.post(app + "gradio_api/upload", cookies=dave.cookies,
                      files={"files": ("dave.txt", b"dave's notes")})
    assert mine.status_code == 200
    path = mine.json()[0]
    files = [[{"path": path, "meta": {"_type": "gradio.FileData"}}]]
    event, data = call(app, bob.cookies, "take", files)
    assert event == "error" and "dave.txt: not a file this session uploaded" in data
    assert httpx.get(app + f"gradio_api/file={path}", cookies=bob.cookies).status_code == 404
    assert httpx.get(app + f"gradio_api/file={path}", cookies=dave.cookies).status_code == 200
    assert call(app, dave.cookies, "take", files) == ("complete", '["[\'dave.txt\']"]')
    assert call(app, dave.cookies, "take", files)[0] == "error"  # claimed once, not twice
    refused = httpx.post(app + "gradio_api/upload", cookies=carol.cookies,
                         files={"files": ("carol.txt", b"a viewer's file")})
    assert refused.status_code == 403 and "may not upload" in refused.json()["detail"]
    note = tmp_path / "note.txt"
    note.write_text("a viewer's note")
    with pytest.raises(httpx.HTTPStatusError, match="403 Forbidden"):
        carol.predict([handle_file(str(note))], api_name="/take")


def test_an_oversize_upload_is_refused_while_it_streams(app):
    bob = client(app, "bob")
    big = httpx.post(app + "gradio_api/upload", cookies=bob.cookies,
                     files={"files": ("big.bin", b"x" * 20_000)})  # the limit is 0.01 MB
    assert big.status_code == 413
    config = httpx.get(app + "config", cookies=bob.cookies).json()
    assert config["max_file_size"] == int(0.01 * 1024 * 1024)


def _config_median_ms(url, cookies, n=30) -> float:
    times = []
    with httpx.Client(cookies=cookies) as c:
        for _ in range(n):
            t = time.perf_counter()
            assert c.get(url + "config").status_code == 200
            times.append(time.perf_counter() - t)
            time.sleep(0.02)
    return 1000 * statistics.median(times)


STORM = """
import secrets, sys, threading, httpx
def hammer():
    with httpx.Client(timeout=60) as c:
        for _ in range(int(sys.argv[2])):
            c.post(sys.argv[1] + "login", data={"username": secrets.token_hex(6),
                                                "password": "x" * 12})
ts = [threading.Thread(target=hammer) for _ in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
"""


def test_a_login_storm_does_not_stall_other_pages(users_file, tmp_path, monkeypatch):
    # bcrypt at 10 rounds (tens of ms): on the event loop, eight clients of bad logins
    # would put /config behind ~8 checks; off it, /config barely notices. No limits,
    # so every attempt really runs bcrypt; the storm runs in another process, so the
    # test's own threads do not compete with the server for the GIL
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 10)
    add_user(users_file, "bob", "editor", "bob-pw-1234")
    unlimited = Bucket(capacity=1e9, leak_s=1.0)
    demo, url = start(users_file, tmp_path, LoginThrottle(per_address=unlimited,
                                                          per_pair=unlimited,
                                                          per_name=unlimited))
    try:
        cookies = client(url, "bob").cookies
        quiet = _config_median_ms(url, cookies)
        storm = subprocess.Popen([sys.executable, "-c", STORM, url, "400"])
        try:
            time.sleep(1.0)
            assert storm.poll() is None  # still hammering while we measure
            loud = _config_median_ms(url, cookies)
            assert storm.poll() is None
        finally:
            storm.kill()
            storm.wait()
    finally:
        demo.close()
    assert loud / quiet < 10, f"/config {quiet:.1f} ms quiet, {loud:.1f} ms under the storm"


def test_without_the_gate_nobody_can_sign_in(users_file, tmp_path):
    import gradio as gr

    from specrag.ui.auth import gradio_auth

    settings = make_settings(tmp_path / "data", **{"security.users_file": str(users_file)})
    with gr.Blocks() as demo:
        gr.Textbox()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                quiet=True, auth=gradio_auth(settings))
    try:
        r = httpx.post(f"http://127.0.0.1:{port}/login",
                       data={"username": "bob", "password": "bob-pw-1234"})
        assert r.status_code == 400  # its session could not be tied to the password
    finally:
        demo.close()


def test_the_storm_test_would_catch_a_blocking_login(users_file, tmp_path, monkeypatch):
    """The same measurement against a login that runs bcrypt on the loop must fail it."""
    import gradio as gr

    from specrag.security.access import AccessControl

    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 10)
    add_user(users_file, "bob", "editor", "bob-pw-1234")
    control = AccessControl(make_settings(tmp_path / "data",
                                          **{"security.users_file": str(users_file)}))
    with gr.Blocks() as demo:
        gr.Textbox()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                quiet=True, auth=lambda u, p: control.authenticate(u, p) is not None)
    url = f"http://127.0.0.1:{port}/"
    try:
        cookies = client(url, "bob").cookies
        quiet = _config_median_ms(url, cookies, n=10)
        storm = subprocess.Popen([sys.executable, "-c", STORM, url, "400"])
        try:
            time.sleep(1.0)
            loud = _config_median_ms(url, cookies, n=10)
        finally:
            storm.kill()
            storm.wait()
    finally:
        demo.close()
    assert loud / quiet >= 10, f"/config {quiet:.1f} ms quiet, {loud:.1f} ms under the storm"


def test_concurrent_logins_all_get_their_own_session(app):
    clients = [None] * 4

    def sign_in(i):
        clients[i] = client(app, "bob" if i % 2 else "dave")

    threads = [threading.Thread(target=sign_in, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [c.predict("", api_name="/whoami") for c in clients] == ["dave", "bob"] * 2
