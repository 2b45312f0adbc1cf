"""The OpenAI-compatible endpoint through the official ``openai`` client and a real server.

``specrag.api.create_app`` under uvicorn on a free loopback port, over a ``Service`` of
the real retriever and Chroma store (the sample handbook in ``handbook``, one HR note in
``hr``) with fake draft and heavy models and the word scorer (``handbook_engine``): easy
questions get an accepted draft, others a rejected one and a heavy answer. Users and
keys are a real users file: bob (editor) may read ``handbook`` only, alice is admin.
"""

import threading
import time

import openai
import pytest
import yaml

from specrag.api import create_app
from specrag.ingest.ingestor import Ingestor
from specrag.pipeline.service import Service
from specrag.security import api_keys
from specrag.security import users as users_mod
from specrag.security.users import Principal, add_user
from tests.support.env import ROOT, free_port, make_settings
from tests.support.fakes import DRAFT_SCRIPT, DRAFT_WRONG, HEAVY_ANSWER, handbook_engine

pytestmark = pytest.mark.slow

EASY = "How many days of paid annual leave does an employee get?"
HARD = "What am I paid for on-call work on a public holiday?"
ACCEPTED = DRAFT_SCRIPT[0][1]


def serve(app) -> tuple[str, object]:
    """``app`` under a real uvicorn server in a thread; its base URL and the server."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.time() + 20
    while not server.started:
        assert time.time() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}/v1", server


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    root = tmp_path_factory.mktemp("openai-api")
    path = root / "users.yaml"
    rounds, users_mod.BCRYPT_ROUNDS = users_mod.BCRYPT_ROUNDS, 4  # module scope: no monkeypatch
    try:
        add_user(path, "alice", "admin", "alice-pw-1234")
        add_user(path, "bob", "editor", "bob-pw-12345")
    finally:
        users_mod.BCRYPT_ROUNDS = rounds
    data = yaml.safe_load(path.read_text())
    data["collections"] = {"handbook": {"read": ["*"], "write": ["editor"]}}
    path.write_text(yaml.safe_dump(data))
    # these tests ask as bob dozens of times a minute: answers are under test, not limits
    return make_settings(root / "data", **{"security.users_file": str(path),
                                           "concurrency.per_user_per_minute": 0})


@pytest.fixture(scope="module")
def server(secured, embedder, tmp_path_factory):
    alice = Principal("alice", "admin")
    ing = Ingestor(secured, embedder=embedder)
    ing.ingest([ROOT / "assets" / "handbook"], "handbook", principal=alice)
    ing.ingest_bytes([("pay.txt", b"Salaries are reviewed every April.")], "hr", principal=alice)
    service = Service(secured, handbook_engine(secured, embedder, 0.0, 0.0))
    url, srv = serve(create_app(secured, service))
    yield url, service
    srv.should_exit = True


def client(url, key) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def keys(secured):
    path = secured.security.users_file
    return {name: api_keys.issue(path, name)[1] for name in ("alice", "bob")}


def test_plain_completion_is_the_final_answer_with_specrag_extras(server, keys):
    url, _ = server
    done = client(url, keys["bob"]).chat.completions.create(
        model="specrag:handbook", messages=[{"role": "user", "content": EASY}])
    assert done.object == "chat.completion" and done.model == "specrag:handbook"
    assert done.choices[0].message.content == ACCEPTED
    assert done.choices[0].finish_reason == "stop"
    extra = done.specrag  # the openai client keeps unknown fields
    assert extra["tier"] == "draft" and extra["draft"] == ACCEPTED
    assert extra["verdict"]["accepted"] is True and extra["warnings"] == []
    assert extra["citations"][0]["source"].startswith("leave")
    assert done.usage.completion_tokens == len(ACCEPTED.split()) and done.usage.prompt_tokens > 20
    assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens


def test_rejected_draft_answers_from_the_heavy_tier(server, keys):
    url, _ = server
    done = client(url, keys["bob"]).chat.completions.create(
        model="specrag:handbook", messages=[{"role": "user", "content": HARD}],
        extra_body={"specrag_policy": "lazy"})
    assert done.choices[0].message.content == HEAVY_ANSWER
    extra = done.specrag
    assert extra["tier"] == "heavy" and extra["draft"] == DRAFT_WRONG
    assert extra["verdict"]["accepted"] is False and extra["policy"] == "lazy"


def _streamed(stream):
    content, reasoning, extras, usage, finish = [], [], None, None, None
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            content.append(choice.delta.content or "")
            reasoning.append((choice.delta.model_extra or {}).get("reasoning_content") or "")
            finish = choice.finish_reason or finish
        extras = getattr(chunk, "specrag", None) or extras
    return "".join(content), "".join(reasoning), extras, usage, finish


def test_streaming_sends_the_draft_as_reasoning_and_the_answer_as_content(server, keys):
    url, _ = server
    stream = client(url, keys["bob"]).chat.completions.create(
        model="specrag:handbook", messages=[{"role": "user", "content": HARD}], stream=True,
        stream_options={"include_usage": True})
    content, reasoning, extras, usage, finish = _streamed(stream)
    assert content == HEAVY_ANSWER == extras["answer"]  # never the rejected draft
    assert reasoning.startswith(DRAFT_WRONG) and "rejected" in reasoning
    assert extras["tier"] == "heavy" and finish == "stop"
    assert usage.completion_tokens == len(DRAFT_WRONG.split()) + len(HEAVY_ANSWER.split())

    stream = client(url, keys["bob"]).chat.completions.create(
        model="specrag:handbook", messages=[{"role": "user", "content": EASY}], stream=True)
    content, reasoning, extras, usage, _ = _streamed(stream)
    assert content == ACCEPTED and reasoning.startswith(ACCEPTED) and "accepted" in reasoning
    assert extras["tier"] == "draft" and usage is None  # no usage chunk unless asked


def test_a_follow_up_turn_answers_the_last_question(server, keys):
    url, _ = server
    turns = [{"role": "system", "content": "Answer like a pirate."},
             {"role": "user", "content": HARD},
             {"role": "assistant", "content": HEAVY_ANSWER},
             {"role": "user", "content": EASY}]
    done = client(url, keys["bob"]).chat.completions.create(model="specrag:handbook",
                                                            messages=turns)
    assert done.choices[0].message.content == ACCEPTED  # the last question's answer
    assert done.specrag["draft"] == ACCEPTED  # the system message changed nothing


def test_a_follow_up_is_answered_in_the_light_of_the_conversation(server, keys):
    url, _ = server
    turns = [{"role": "user", "content": EASY},
             {"role": "assistant", "content": [{"type": "text", "text": ACCEPTED}]},
             {"role": "user", "content": "And is that per calendar year?"}]
    done = client(url, keys["bob"]).chat.completions.create(model="specrag:handbook",
                                                            messages=turns)
    # the follow-up is searched with the conversation's words: the conversation reached it
    assert done.specrag["searched_for"] == "And is that per calendar year? (days, paid, annual)"
    assert done.specrag["sources"][0]["source"] == "leave.md"  # retrieval found the leave policy


def test_a_wrong_or_revoked_key_is_401(server, secured, keys):
    url, _ = server
    with pytest.raises(openai.AuthenticationError) as err:
        client(url, "sk-specrag-not-a-key").chat.completions.create(
            model="specrag:handbook", messages=[{"role": "user", "content": EASY}])
    assert err.value.status_code == 401 and err.value.code == "invalid_api_key"
    path = secured.security.users_file
    key_id, key = api_keys.issue(path, "bob")
    assert client(url, key).models.list().data
    assert api_keys.revoke(path, "bob", key_id) == 1
    with pytest.raises(openai.AuthenticationError):
        client(url, key).models.list()
    assert client(url, keys["bob"]).models.list().data  # his other key still works


def test_a_collection_the_user_may_not_read_is_403_and_an_unknown_one_404(server, keys):
    url, _ = server
    ask = [{"role": "user", "content": "When are salaries reviewed?"}]
    with pytest.raises(openai.PermissionDeniedError) as err:
        client(url, keys["bob"]).chat.completions.create(model="specrag:hr", messages=ask)
    assert "may not read" in err.value.message and err.value.status_code == 403
    with pytest.raises(openai.PermissionDeniedError):  # streaming refuses before it starts
        client(url, keys["bob"]).chat.completions.create(model="specrag:hr", messages=ask,
                                                         stream=True)
    with pytest.raises(openai.NotFoundError) as err:
        client(url, keys["alice"]).chat.completions.create(model="specrag:nope", messages=ask)
    assert err.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        client(url, keys["alice"]).chat.completions.create(model="gpt-4o", messages=ask)
    done = client(url, keys["alice"]).chat.completions.create(model="specrag:hr", messages=ask)
    assert done.specrag["citations"] or done.choices[0].message.content


def test_models_lists_only_the_collections_the_key_may_read(server, keys):
    url, _ = server
    bob = [m.id for m in client(url, keys["bob"]).models.list()]
    alice = [m.id for m in client(url, keys["alice"]).models.list()]
    assert bob == ["specrag:handbook"]
    assert alice == ["specrag:handbook", "specrag:hr"]  # no "default" collection: no alias


def test_bad_requests_are_400_in_openais_shape(server, keys):
    url, _ = server
    c = client(url, keys["bob"])
    with pytest.raises(openai.BadRequestError) as err:
        c.chat.completions.create(model="specrag:handbook",
                                  messages=[{"role": "assistant", "content": "hi"}])
    assert err.value.body["message"].startswith("the last message")
    with pytest.raises(openai.BadRequestError) as err:
        c.chat.completions.create(model="specrag:handbook", extra_body={"specrag_policy": "x"},
                                  messages=[{"role": "user", "content": EASY}])
    assert err.value.param == "specrag_policy"
    with pytest.raises(openai.BadRequestError):  # the engine's own check: an empty question
        c.chat.completions.create(model="specrag:handbook",
                                  messages=[{"role": "user", "content": "  "}])


def test_the_ledger_books_api_questions_to_the_user(server, keys):
    _, service = server
    sessions = {row["key"] for row in service.usage(by="session")}
    assert "api:bob" in sessions


def test_the_endpoint_answers_as_the_library_does_time_after_time(server, keys):
    """20 rounds of the same question, the library's ``Service.aask`` interleaved with the
    endpoint through the openai client (plain and streamed to the last chunk): the same
    answer every time. Not a timing test (speed belongs to benchmarks); ``-s`` prints the
    medians as a by-product, which BENCHMARKS.md quotes as a rough overhead figure."""
    import asyncio
    import statistics

    url, service = server
    c = client(url, keys["bob"])
    bob = Principal("bob", "editor")
    ask = [{"role": "user", "content": EASY}]
    times = {"direct": [], "plain": [], "stream": []}
    plain, streamed = [], []

    def timed(name, fn):
        t0 = time.perf_counter()
        fn()
        times[name].append((time.perf_counter() - t0) * 1000)

    async def run():
        for i in range(23):  # the first 3 warm the caches of every path
            t0 = time.perf_counter()
            answer = await service.aask(EASY, collection="handbook", principal=bob,
                                        session="api:bob")
            times["direct"].append((time.perf_counter() - t0) * 1000)
            assert answer.text == ACCEPTED
            timed("plain", lambda: plain.append(c.chat.completions.create(
                model="specrag:handbook", messages=ask).choices[0].message.content))
            timed("stream", lambda: streamed.append("".join(
                ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
                    model="specrag:handbook", messages=ask, stream=True) if ch.choices)))

    asyncio.run(run())
    med = {k: statistics.median(v[3:]) for k, v in times.items()}
    print(f"\nmedian ms over 20: direct {med['direct']:.1f}, plain {med['plain']:.1f} "
          f"(+{med['plain'] - med['direct']:.1f}), stream {med['stream']:.1f} "
          f"(+{med['stream'] - med['direct']:.1f})")
    assert plain == [ACCEPTED] * 23 and streamed == [ACCEPTED] * 23
