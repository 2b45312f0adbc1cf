"""The app's /chat and /ingest endpoints through gradio_client against a launched server.

The engine is made of fakes (scripted draft and heavy generators, the word-overlap
scorer as verifier, a reverse reranker) over the REAL retriever and Chroma store, into
which the app ingests the sample handbook on first start.
"""

import threading

import pytest

from specrag.settings import Settings as _Settings
from specrag.ui.app import build
from tests.support.env import make_settings
from tests.support.fakes import DRAFT_WRONG, HEAVY_ANSWER, handbook_engine, launch

T = _Settings().verify.threshold  # the calibrated default

pytestmark = pytest.mark.slow

EASY = "How many days of paid annual leave do employees get?"
HARD = "Can I fly premium economy to a client meeting in New York?"


@pytest.fixture(scope="module")
def app(tmp_path_factory, embedder):
    settings = make_settings(tmp_path_factory.mktemp("ui-api") / "data")
    demo = build(settings, engine=handbook_engine(settings, embedder, 0.0, 0.0))
    assert demo.specrag_sample.wait(120)
    yield demo, launch(demo)
    demo.close()


@pytest.fixture(scope="module")
def client(app):
    from gradio_client import Client

    return Client(app[1], verbose=False)


def test_sample_handbook_is_ingested_on_first_start(app, client):
    assert app[0].specrag_sample.status == "ingested 7 sample files"
    status, hits = client.predict("on-call allowance per week", "handbook", 3, api_name="/search")
    assert status.startswith("3 chunks") and hits["data"][0][2] == "oncall.md"
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert {"/chat", "/ingest", "/delete", "/search", "/metrics"} <= set(api)


def test_chat_easy_question_is_answered_by_the_draft(client):
    r = client.predict(EASY, "handbook", "lazy", api_name="/chat")
    assert r["tier"] == "draft" and r["policy"] == "lazy" and r["heavy"] is None
    assert r["answer"] == r["draft"] and "25 days" in r["answer"]
    v = r["verdict"]
    assert v["accepted"] and v["score"] == 1.0 and v["threshold"] == T
    assert "25 days of paid annual leave" in v["sentences"][0]["best_chunk_text"]
    assert r["citations"][0]["source"] == "leave.md" and "25 days" in r["citations"][0]["text"]
    assert {"retrieval", "draft", "verify", "total"} <= set(r["timings_ms"])
    assert r["cost_usd"] == 0 and r["heavy_only_cost_usd"] > 0


def test_chat_hard_question_goes_to_the_heavy_model(client):
    r = client.predict(HARD, "handbook", "", api_name="/chat")  # "": the app's policy
    assert r["tier"] == "heavy" and r["draft"] == DRAFT_WRONG and r["answer"] == HEAVY_ANSWER
    assert not r["verdict"]["accepted"] and r["verdict"]["score"] < T
    assert [c["number"] for c in r["citations"]] == [1, 2] and r["cost_usd"] > 0
    only = client.predict(HARD, "handbook", "heavy-only", api_name="/chat")
    assert only["tier"] == "heavy" and only["draft"] is None and only["verdict"] is None


def test_chat_takes_the_conversation_so_far(client):
    history = [{"role": "user", "content": "How long must passwords be?"},
               {"role": "assistant", "content": "Passwords must be at least 14 characters."}]
    r = client.predict("And how often do they have to be changed?", "handbook", "lazy", history,
                       api_name="/chat")
    # the conversation's words carry the follow-up (``chat.rewrite: turns``), no model call
    assert r["question"] == "And how often do they have to be changed?"
    assert r["searched_for"] == "And how often do they have to be changed? (passwords)"
    assert "rewrite" in r["timings_ms"]
    alone = client.predict(EASY, "handbook", "lazy", history, api_name="/chat")
    assert alone["searched_for"] is None and alone["tier"] == "draft"  # no rewrite needed


def test_chat_errors_are_one_line_messages(client):
    from gradio_client.exceptions import AppError

    for question, collection, policy, message in [
            ("   ", "handbook", "", "the question is empty"),
            (EASY, "nosuch", "", "collection 'nosuch' does not exist"),
            (EASY, "handbook", "yolo", "policy must be one of")]:
        with pytest.raises(AppError, match=message):
            client.predict(question, collection, policy, api_name="/chat")


def test_over_long_and_non_text_questions_are_refused_in_plain_words(client):
    from gradio_client.exceptions import AppError

    limit = _Settings().security.max_question_chars
    with pytest.raises(AppError) as err:  # one character too many: refused, not cut
        client.predict("x" * (limit + 1), "handbook", "", api_name="/chat")
    assert str(err.value) == (f"the question is too long ({limit + 1:,} characters; the limit "
                              f"is {limit:,}): ask about one thing at a time")
    assert client.predict("y" * (limit - 30) + " annual leave days?", "handbook", "lazy",
                          api_name="/chat")["question"].endswith("annual leave days?")
    for question, message in [(123, "the question must be text, not int"),
                              (["a"], "the question must be text, not list")]:
        with pytest.raises(AppError, match=message):
            client.predict(question, "handbook", "", api_name="/chat")
    status, _ = client.predict("annual leave", "handbook", 3, api_name="/search")
    assert status.startswith("3 chunks")
    with pytest.raises(AppError, match="^collection name 'no such' is invalid: use"):
        client.predict("annual leave", "no such", 3, api_name="/search")


def test_ingest_reports_each_file_then_delete(tmp_path, client):
    from gradio_client import handle_file

    from specrag.ui.sample import SAMPLE_DIR

    new = tmp_path / "parking.md"
    new.write_text("# Parking\n\nThe office garage has 40 spaces; book one in the Parking app "
                   "by 09:00 the day before.\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n")
    summary, results, docs = client.predict(
        [handle_file(str(new)), handle_file(str(SAMPLE_DIR / "leave.md")), handle_file(str(empty))],
        "handbook", api_name="/ingest")
    assert summary.startswith("1 stored, 1 already present, 1 failed")
    rows = {r[0]: r for r in results["data"]}
    assert rows["parking.md"][1:3] == ["added", 1]
    assert rows["leave.md"][1] == "already present"
    assert rows["empty.txt"][1] == "failed" and rows["empty.txt"][3]
    assert "parking.md" in [r[0] for r in docs["data"]] and len(docs["data"]) == 8
    msg, docs = client.predict("parking.md", "handbook", api_name="/delete")
    assert msg == "Deleted parking.md." and len(docs["data"]) == 7


def test_concurrent_chats_get_their_own_answers(app):
    from gradio_client import Client

    questions = [EASY, HARD, "How long must passwords be?", HARD]
    out = [None] * len(questions)

    def ask(i):
        out[i] = Client(app[1], verbose=False).predict(questions[i], "handbook", "",
                                                        api_name="/chat")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert [r["question"] for r in out] == questions
    assert [r["tier"] for r in out] == ["draft", "heavy", "draft", "heavy"]
    assert "14 characters" in out[2]["answer"] and out[1]["answer"] == HEAVY_ANSWER


def test_without_an_engine_the_real_one_is_built_on_the_first_question(tmp_path):
    from specrag.observability.audit import Auditor
    from specrag.pipeline.engine import SpeculativeRAG
    from specrag.pipeline.service import Service
    from specrag.resilience.failover import FallbackGenerator
    from specrag.resilience.retry import RetryingGenerator

    demo = build(make_settings(tmp_path / "data"), sample=False)
    engines = demo.specrag_engines
    assert engines._engine is None and not engines.warm  # nothing built or loaded at startup
    assert demo.specrag_sample.status == "skipped"
    service = engines.base()  # what the first question does before warming up
    assert isinstance(service, Service) and isinstance(service.engine, SpeculativeRAG)
    engine = service.engine  # resilient tiers, the audit, the app's retriever; nothing loaded
    for tier in (engine.draft, engine.heavy):  # a chain (its breaker) of retried backends
        assert isinstance(tier, FallbackGenerator)
        assert all(isinstance(m, RetryingGenerator) for m in tier.members)
    assert isinstance(engine.auditor, Auditor) and engine.retriever is engines._retriever
    assert not engine._warm and not engines.warm
    assert engines.base() is service  # one engine for every session
