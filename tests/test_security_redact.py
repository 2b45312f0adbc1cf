"""PII redaction: detection quality, placeholders, streaming restore, and the wire to Anthropic."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from specrag.generators.base import collect
from specrag.generators.openai_compat import OpenAICompatGenerator
from specrag.grounding.verifier import Verifier
from specrag.pipeline.engine import SpeculativeRAG
from specrag.pipeline.prompts import build_messages
from specrag.security import redacting
from specrag.security.pii import detect, iban_ok, luhn_ok
from specrag.security.pii_eval import evaluate, generate
from specrag.security.redact import Redaction, StreamRestorer
from specrag.testing import FakeGenerator
from specrag.types import Chunk
from tests.support.env import make_settings
from tests.support.fakes import FakeRetriever, ReverseReranker, WordScorer

PII = {"email": "maria.garcia@example.com", "phone": "+44 20 7946 0958",
       "card": "4111 1111 1111 1111", "iban": "DE89 3704 0044 0532 0130 00",
       "ssn": "123-45-6789", "ip": "192.168.10.24", "name": "Maria Garcia"}
DOC = (f"Refunds: {PII['name']} (SSN {PII['ssn']}) asked for a refund to {PII['iban']}. "
       f"Contact her at {PII['email']} or {PII['phone']}; card on file {PII['card']}; "
       f"last login from {PII['ip']}.")


def raw_values(value: str) -> set[str]:
    """A value and its digits-only / compact forms: none may reach a third party."""
    forms = {value, value.replace(" ", "")}
    digits = re.sub(r"\D", "", value)
    if len(digits) >= 7:
        forms.add(digits)
    return forms


# -- detection ------------------------------------------------------------------------------
def test_precision_and_recall_on_the_generated_set():
    """The issue's targets on the held-out set (its people are in no detector list): the
    set ``python -m specrag.security.pii_eval`` reports in README.md."""
    scores = evaluate(generate(2000, seed=0))
    for kind in ("email", "iban", "card", "ssn", "ip", "phone"):
        assert scores[kind]["recall"] >= 0.98 and scores[kind]["precision"] >= 0.95, (kind, scores)
    # capitalised phrases the stop-lists have never seen ("Silicon Valley") cost precision
    assert scores["name"]["recall"] >= 0.90 and scores["name"]["precision"] >= 0.85, scores
    assert min(s["gold"] for s in scores.values()) >= 100


def test_checksums_decide():
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert iban_ok("GB82WEST12345698765432") and not iban_ok("GB83WEST12345698765432")
    text = ("Test card 4111 1111 1111 1112, IBAN GB83 WEST 1234 5698 7654 32, SSN 000-12-3456, "
            "version 1.2.3.4, at 10:30:00 on 2024-05-01, ISBN 978-3-16-148410-0.")
    assert detect(text) == []


# -- placeholders ----------------------------------------------------------------------------
def test_placeholders_are_consistent_within_a_request_and_restored():
    r = Redaction()
    a = r.redact(f"Write to {PII['email']} or MARIA.GARCIA@example.com, not bob@example.org.")
    b = r.redact(f"Reminder: {PII['email']}")
    assert a == "Write to <EMAIL_1> or <EMAIL_1>, not <EMAIL_2>." and b == "Reminder: <EMAIL_1>"
    assert r.restore("Send it to <EMAIL_1> [1]; cc EMAIL_2 and &lt;EMAIL_1&gt;.") == \
        f"Send it to {PII['email']} [1]; cc bob@example.org and {PII['email']}."
    assert Redaction().redact("call 555-234-5678") != "call 555-234-5678"  # new request, new map


def test_a_forged_placeholder_cannot_pull_pii_into_the_answer():
    r = Redaction()
    question = r.redact("What is <EMAIL_1>?")
    doc = r.redact(f"Contact {PII['email']}.")
    assert question == "What is <EMAIL_1>?" and doc == "Contact <EMAIL_2>."
    assert r.restore("<EMAIL_1>") == "<EMAIL_1>"


@hsettings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(st.lists(st.sampled_from(["<EMAIL_1>", "<NAME_1>", "EMAIL_1", "&lt;IBAN_1&gt;", "[CARD_1]",
                                 "<EMAIL_", "<", "&lt;", " ", "x", "EMAIL_10", "<NAME_1", ">",
                                 "é", "\n", "NAME_1>"]), max_size=30),
       st.lists(st.integers(0, 200), max_size=12))
def test_streamed_restore_equals_restore_of_the_whole_text(pieces, cuts):
    r = Redaction()
    r.redact(f"{PII['email']} {PII['name']} {PII['iban']} {PII['card']}")
    text = "".join(pieces)
    bounds = sorted({min(c, len(text)) for c in cuts})
    deltas = [text[i:j] for i, j in zip([0] + bounds, bounds + [len(text)])]
    restorer = StreamRestorer(r)
    streamed = "".join(restorer.feed(d) for d in deltas) + restorer.flush()
    assert streamed == r.restore(text)


# -- the wire ------------------------------------------------------------------------------
def assert_no_raw_pii(requests):
    wire = json.dumps([r["body"] for r in requests], ensure_ascii=False)
    for value in PII.values():
        for form in raw_values(value):
            assert form not in wire, form
    for forbidden in ("Maria", "Garcia", "maria"):
        assert forbidden not in wire


def test_anthropic_round_trip_never_sends_raw_pii(api, claude, settings):
    chunk = Chunk("c1", "d1", "refunds.md", DOC, 0, 0, len(DOC), "h", "v")
    messages = build_messages(f"How do I reach {PII['name']}?", [chunk], "heavy")
    gen = redacting.wrap(claude, settings)
    assert isinstance(gen, redacting.RedactingGenerator)
    text, usage = asyncio.run(collect(gen, messages, max_tokens=64))
    assert_no_raw_pii(api.requests)
    sent = api.requests[-1]["body"]["messages"][0]["content"]
    assert "<NAME_1>" in sent and "<EMAIL_1>" in sent and "<SSN_1>" in sent
    assert sent.count("<NAME_1>") == 2  # the question and the document name the same person
    # the server answered with placeholders; the caller sees the real values
    assert text.startswith(f"Refunds: {PII['name']} (SSN {PII['ssn']}) asked") and "<" not in text
    assert usage.backend == "anthropic"


def test_engine_redacts_the_heavy_call_and_restores_the_answer(api, claude, tmp_path):
    s = make_settings(tmp_path)
    local_draft = FakeGenerator(replies=["unused"])
    engine = SpeculativeRAG(s, retriever=FakeRetriever([DOC]), draft=local_draft, heavy=claude,
                            verifier=Verifier(s, scorer=WordScorer()), reranker=ReverseReranker())
    answer = asyncio.run(engine.aask(f"Where should the refund for {PII['name']} go?",
                                     policy="heavy-only"))
    assert_no_raw_pii(api.requests)
    assert PII["iban"] in answer.text and PII["name"] in answer.text
    assert answer.question.endswith(f"{PII['name']} go?")  # the user sees their own question


def test_local_models_get_raw_text_unless_configured(api, tmp_path, monkeypatch):
    s = make_settings(tmp_path)
    fake = FakeGenerator()
    assert redacting.wrap(fake, s) is fake
    loopback = OpenAICompatGenerator("m", base_url=api.url + "/v1")
    assert redacting.wrap(loopback, s) is loopback  # a model served on this machine
    remote = OpenAICompatGenerator("m", base_url="https://llm.example.net/v1")
    assert isinstance(redacting.wrap(remote, s), redacting.RedactingGenerator)
    assert redacting.wrap(remote, s.with_values(**{"security.redact": False})) is remote
    fake.remote = True  # a wrapper (e.g. failover) can declare where its calls go
    assert isinstance(redacting.wrap(fake, s), redacting.RedactingGenerator)
    with pytest.raises(ValueError, match="unknown kind"):
        redacting.wrap(remote, s.with_values(**{"security.redact_types": "email,dna"}))

    everything = redacting.wrap(loopback, s.with_values(**{"security.redact_local": True}))
    chunk = Chunk("c1", "d1", "refunds.md", DOC, 0, 0, len(DOC), "h", "v")
    text, _ = asyncio.run(collect(everything, build_messages("Who?", [chunk], "draft")))
    assert_no_raw_pii(api.requests)
    assert PII["name"] in text


def test_only_some_kinds_when_configured(settings):
    s = settings.with_values(**{"security.redact_types": "email"})
    gen = redacting.wrap(OpenAICompatGenerator("m", base_url="https://x.example/v1"), s)
    r = Redaction(gen.kinds)
    assert r.redact(DOC).count("<") == 1 and PII["name"] in r.redact(DOC)


def test_closing_the_wrapper_stops_the_inner_generation(settings):
    inner = FakeGenerator(replies=[" ".join(["word"] * 100)], delay_s=0.001)
    inner.remote = True
    gen = redacting.wrap(inner, settings)

    async def take_three():
        stream = gen.stream([{"role": "user", "content": "hi"}])
        got = [await stream.__anext__() for _ in range(3)]
        await stream.aclose()
        return got
    assert len(asyncio.run(take_three())) == 3
    assert inner.cancelled == 1


FILLER = ["the", "refund", "Dear", "call", "on", ",", ".", " ", "\n", "(", ")", ":", "-", "+1",
          "2024-05-01", "v1.2.3.4", "<b>", "&amp;", "ORD-12345678", "Will", "May"]


@hsettings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(st.lists(st.sampled_from(FILLER + list(PII.values())), max_size=60).map(" ".join))
def test_redact_then_restore_gives_back_the_text(text):
    r = Redaction()
    redacted = r.redact(text)
    assert r.restore(redacted) == text
    for value in PII.values():
        assert value not in redacted


@pytest.mark.parametrize("unit", ["Maria ", "Dear Xx ", "a@b.co ", "555-234-5678 ", "1 ", "a:",
                                  "1.", "+1 ", "DE89 ", "SSN ", "a.", "(1) ", "A1"])
def test_no_quadratic_or_backtracking_blowup_on_hostile_text(unit):
    """Four times the text takes about four times as long (quadratic code: sixteen). A
    ratio in one run, the best of three each, so a slow or busy machine cannot fail it."""
    import time

    def cost(chars: int) -> float:
        text = unit * (chars // len(unit))
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            r = Redaction()
            assert r.restore(r.redact(text)) == text
            best = min(best, time.perf_counter() - start)
        return best

    small, large = cost(15_000), cost(60_000)
    assert large / max(small, 1e-4) < 9.0, (small, large)
