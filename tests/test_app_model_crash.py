"""The app on the real local models survives ``kill -9`` of a model server mid-answer.

The app is built as ``python app.py`` builds it (a ``Service`` with failover tiers, the
ledger and the audit), launched on loopback and asked through ``gradio_client``. The
draft's model server process is killed while it drafts: the heavy tier answers instead.
The heavy's is killed while it writes: the user gets a one-line error. Each time the next
question is answered, by a fresh process. Two sessions asking at once both get their
own answers.
"""

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from specrag.generators.llama_server import servers
from specrag.ui.app import build
from tests.support.env import make_settings
from tests.support.fakes import launch

pytestmark = pytest.mark.slow
pytest.importorskip("xllamacpp", reason="xllamacpp is in requirements.txt")

LEAVE = "How many days of paid annual leave do employees get?"
EXPENSES = "Within how many days must expense claims be submitted?"
PASSWORDS = "How long must passwords be?"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    root = tmp_path_factory.mktemp("app-crash")
    # the 0.5B Qwen as the heavy model too keeps CI fast (the default heavy is the 1.5B)
    s = make_settings(root / "data", **{"models.heavy": "manifest:qwen2.5-coder-0.5b-instruct",
                                        "generation.draft_max_tokens": 48,
                                        "generation.heavy_max_tokens": 48})
    demo = build(s)
    assert demo.specrag_sample.wait(300)
    url = launch(demo)
    yield demo, url
    demo.close()
    for w in servers():
        w.close()


@pytest.fixture(scope="module")
def client(app):
    from gradio_client import Client

    return Client(app[1], verbose=False)


def _server(role: str):
    # the app's; servers other test modules of this process made are closed by now
    found = [w for w in servers() if w.label.startswith(role + " ") and w.alive()]
    assert len(found) == 1, [w.label for w in servers()]
    return found[0]


def _kill_when_busy(role: str, timeout_s: float = 120) -> threading.Thread:
    """Kill -9 the role's worker as soon as it is generating (in the background)."""
    done = threading.Event()

    def watch():
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            ws = [w for w in servers() if w.label.startswith(role + " ") and w.busy and w.pid]
            if ws:
                time.sleep(0.2)  # mid-answer, not before its first token
                os.kill(ws[0].pid, signal.SIGKILL)
                done.set()
                return
            time.sleep(0.01)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    t.killed = done
    return t


def _service(app):
    return app[0].specrag_engines.service


def test_killed_draft_worker_escalates_and_the_next_question_works(app, client):
    client.predict(LEAVE, "handbook", "lazy", api_name="/chat")  # models loaded, workers up
    pid = _server("draft").pid
    watcher = _kill_when_busy("draft")
    # a question no worker has seen: one just asked comes back from llama.cpp's prompt
    # cache before the watcher's 0.2 s (a one-chunk draft prompt), and the heavy test
    # below asks EXPENSES of a heavy worker that must not have it cached either
    r = client.predict(PASSWORDS, "handbook", "lazy", api_name="/chat")
    watcher.join(5)
    assert watcher.killed.is_set()
    assert r["tier"] == "heavy" and r["answer"] and "SIGKILL" in r["draft_error"]
    # the ledger has the failed draft attempt, the draft tier's breaker counted it
    rows = _service(app).ledger.rows()
    assert any(x["stage"] == "draft" and "SIGKILL" in x["error"] for x in rows)
    r2 = client.predict(LEAVE, "handbook", "draft-only", api_name="/chat")
    assert r2["tier"] == "draft" and "25" in r2["answer"] and not r2["draft_error"]
    assert _server("draft").pid not in (None, pid) and _server("draft").restarts == 1


def test_killed_heavy_worker_gives_a_one_line_error_then_answers(app, client):
    from gradio_client.exceptions import AppError

    heavy = _service(app).engine.heavy  # the heavy tier's chain
    watcher = _kill_when_busy("heavy")
    with pytest.raises(AppError) as err:
        client.predict(EXPENSES, "handbook", "heavy-only", api_name="/chat")
    watcher.join(5)
    assert watcher.killed.is_set()
    message = str(err.value)
    assert "killed by SIGKILL" in message and "restarts" in message and "\n" not in message
    assert heavy.breakers[0].consecutive_failures >= 1
    r = client.predict(EXPENSES, "handbook", "heavy-only", api_name="/chat")
    assert r["tier"] == "heavy" and "30" in r["answer"]
    assert heavy.breakers[0].consecutive_failures == 0
    assert _server("heavy").restarts == 1


def test_two_sessions_at_once_each_get_their_own_answer(app):
    from gradio_client import Client

    url = app[1]
    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(lambda q: Client(url, verbose=False).predict(
            q, "handbook", "draft-only", api_name="/chat"), q) for q in (LEAVE, EXPENSES)]
        leave, expenses = (j.result(timeout=300) for j in jobs)
    assert leave["question"] == LEAVE and "25" in leave["answer"]
    assert expenses["question"] == EXPENSES and "30" in expenses["answer"]
