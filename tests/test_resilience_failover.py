"""Failover chains, latency-triggered circuit breaking, pools and chains from settings."""

import asyncio

import pytest

from specrag.resilience.attempts import AttemptsFailed
from specrag.resilience.balance import LeastLatency, RoundRobin
from specrag.resilience.breaker import CLOSED, OPEN, CircuitBreaker
from specrag.resilience.chains import parse_entry, tier_from_settings
from specrag.resilience.failover import FallbackGenerator
from specrag.resilience.retry import RetryingGenerator, RetryPolicy
from specrag.testing.mockapi import MockAPI
from tests.support.env import make_settings
from tests.support.resilience import (
    ANSWER,
    MESSAGES,
    FakeClock,
    Scripted,
    Sleeps,
    collect_all,
    err,
    run,
)


def chain(members, clock=None, **kw):
    clock = clock or FakeClock()
    breakers = [CircuitBreaker(m.name, clock=clock, min_samples=3, failures=3, open_s=30)
                for m in members]
    return FallbackGenerator(members, breakers=breakers, clock=clock, **kw)


def test_failover_records_every_attempt_and_why():
    primary = Scripted("anthropic", "claude-sonnet-4-6", [err(529, msg="overloaded")])
    backup = Scripted("openai", "backup", ["from the backup [1]"])
    local = Scripted("llama-cpp", "qwen-1.5b", ["local [1]"])
    fb = chain([RetryingGenerator(primary, RetryPolicy(max_attempts=2), sleep=Sleeps()),
                backup, local])
    pieces, usage = run(collect_all(fb))
    assert "".join(pieces) == "from the backup [1]"
    assert usage.backend == "openai" and usage.model == "backup"
    got = [(a.backend, a.model, a.outcome, a.status, a.retryable) for a in usage.attempts]
    assert got == [("anthropic", "claude-sonnet-4-6", "error", 529, True),
                   ("anthropic", "claude-sonnet-4-6", "error", 529, True),
                   ("openai", "backup", "ok", None, False)]
    assert all(a.latency_ms >= 0 for a in usage.attempts)
    assert fb.attempts == usage.attempts and local.calls == 0


def test_auth_error_fails_over_at_once():
    primary = Scripted("anthropic", "c", [err(401, retryable=False, msg="bad key")])
    fb = chain([RetryingGenerator(primary, sleep=Sleeps()), Scripted("openai", "b", ["ok [1]"])])
    pieces, usage = run(collect_all(fb))
    assert primary.calls == 1 and [a.status for a in usage.attempts] == [401, None]


def test_all_failing_raises_with_all_attempts():
    fb = chain([Scripted("a", "m", [err(500)]), Scripted("b", "m", [err(400, retryable=False)])])
    with pytest.raises(AttemptsFailed) as e:
        run(collect_all(fb))
    assert [(a.backend, a.status) for a in e.value.attempts] == [("a", 500), ("b", 400)]
    assert "every backend failed" in str(e.value)


def test_latency_opens_the_breaker_routes_to_next_and_probe_brings_it_back():
    clock = FakeClock()
    slow = ("slow", 2.5, "slow answer [1]")  # 2,500 ms to the first token
    primary = Scripted("anthropic", "claude", [slow, slow, slow, "fast again [1]"], clock=clock)
    backup = Scripted("openai", "backup", ["backup answer [1]"])
    fb = chain([primary, backup], clock)
    for _ in range(3):  # three slow answers: p99 2,500 ms > 2,000 ms with min_samples=3
        assert "".join(run(collect_all(fb))[0]) == "slow answer [1]"
    assert fb.breakers[0].state == OPEN
    pieces, usage = run(collect_all(fb))
    assert "".join(pieces) == "backup answer [1]" and primary.calls == 3
    assert [a.outcome for a in usage.attempts] == ["skipped", "ok"]
    assert usage.attempts[0].error == "circuit open"
    clock.advance(30)  # half-open: the next call probes the primary, which is fast now
    pieces, usage = run(collect_all(fb))
    assert "".join(pieces) == "fast again [1]" and fb.breakers[0].state == CLOSED
    states = [t.new for t in fb.breakers[0].transitions]
    assert states == ["open", "half-open", "closed"]


def test_open_circuits_are_still_tried_as_a_last_resort():
    clock = FakeClock()
    a = Scripted("a", "m", [err(503)] * 3 + ["a recovered [1]"])
    b = Scripted("b", "m", [err(503)] * 3 + ["b recovered [1]"])
    fb = chain([a, b], clock)
    for _ in range(3):
        with pytest.raises(AttemptsFailed):
            run(collect_all(fb))
    assert [br.state for br in fb.breakers] == [OPEN, OPEN]
    pieces, usage = run(collect_all(fb))
    assert "".join(pieces) == "a recovered [1]"
    assert [x.outcome for x in usage.attempts] == ["skipped", "skipped", "ok"]


def test_cut_stream_fails_over_to_an_identical_endpoint_without_repeating():
    a = Scripted("openai", "qwen", [("Staff get 25", err(None, msg="cut"))])
    b = Scripted("openai", "qwen", [ANSWER])
    pieces, usage = run(collect_all(chain([a, b]), MESSAGES))
    assert "".join(pieces) == ANSWER
    assert [x.outcome for x in usage.attempts] == ["error", "ok"]


def test_round_robin_pool_spreads_calls():
    members = [Scripted("openai", "qwen", [f"endpoint {i} [1]"]) for i in range(3)]
    pool = chain(members, balancer=RoundRobin())
    answers = [run(collect_all(pool))[0][0] + run(collect_all(pool))[0][0] for _ in range(3)]
    assert [m.calls for m in members] == [2, 2, 2] and answers


def test_least_latency_prefers_the_fastest_endpoint():
    clock = FakeClock()
    slow = Scripted("openai", "q", [("slow", 0.8, "slow [1]")], clock=clock)
    fast = Scripted("openai", "q", [("slow", 0.1, "fast [1]")], clock=clock)
    pool = chain([slow, fast], clock, balancer=LeastLatency())
    got = ["".join(run(collect_all(pool))[0]) for _ in range(5)]
    assert got[:2] == ["slow [1]", "fast [1]"]  # each measured once, then the fastest
    assert got[2:] == ["fast [1]"] * 3


def test_a_member_that_cannot_start_is_skipped():
    class NoKey(Scripted):
        def warm_up(self):
            raise RuntimeError("no Anthropic API key")

    fb = chain([NoKey("anthropic", "c"), Scripted("llama-cpp", "local", ["local [1]"])])
    fb.warm_up()
    assert "no Anthropic API key" in fb.unavailable[0]
    assert "".join(run(collect_all(fb))[0]) == "local [1]"


def test_cancelling_mid_stream_closes_the_backend_and_records_it():
    member = Scripted("anthropic", "c", ["one two three four five six"])
    fb = chain([member])

    async def take_two():
        agen = fb.stream(MESSAGES)
        got = [await agen.__anext__(), await agen.__anext__()]
        await agen.aclose()
        return got

    assert run(take_two()) == ["one", " two"]
    assert member.closed == 1 and fb.attempts[0].outcome == "cancelled"
    assert fb.breakers[0].state == CLOSED


def test_parse_chain_entries():
    e = parse_entry("openai:qwen2.5-7b@http://a:8000/v1, http://b:8000/v1")
    assert (e.backend, e.model, e.urls) == ("openai", "qwen2.5-7b", ("http://a:8000/v1",
                                                                     "http://b:8000/v1"))
    assert parse_entry("llama-cpp").local and parse_entry("anthropic:claude-x").urls == ()


def test_heavy_chain_from_settings_over_both_apis(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-test")
    with MockAPI() as claude_api, MockAPI() as backup_a, MockAPI() as backup_b:
        s = make_settings(tmp_path, anthropic_api_key_env="TEST_ANTHROPIC_KEY", **{
            "generation.anthropic_base_url": claude_api.url,
            "resilience.heavy_chain": [
                "anthropic:claude-sonnet-4-6",
                f"openai:backup@{backup_a.url}/v1,{backup_b.url}/v1",
                "fake:local"],
            "resilience.max_attempts": 2, "resilience.backoff_base_s": 0.01,
            "resilience.first_token_timeout_s": 2.0})
        heavy = tier_from_settings("heavy", s).warm_up()
        assert isinstance(heavy, FallbackGenerator) and len(heavy.members) == 3
        assert isinstance(heavy.members[1], FallbackGenerator)  # the pool of two endpoints
        claude_api.faults.extend(["529", "529"])  # both tries fail -> the pool answers

        async def two_calls():  # one event loop: the SDK client's connections belong to it
            return (await collect_all(heavy, MESSAGES, max_tokens=64),
                    await collect_all(heavy, MESSAGES, max_tokens=64))

        (pieces, usage), (pieces2, usage2) = run(two_calls())
        assert "".join(pieces) == ANSWER and usage.backend == "openai"
        assert [(a.backend, a.status) for a in usage.attempts] == [
            ("anthropic", 529), ("anthropic", 529), ("openai", None)]
        assert usage.attempts[-1].endpoint.startswith("http://127.0.0.1")
        # the next call goes back to Claude, which answers
        assert usage2.backend == "anthropic" and len(usage2.attempts) == 1


def test_single_backend_without_chain_still_retries(tmp_path):
    s = make_settings(tmp_path, **{"generation.heavy": "fake:x"})
    gen = tier_from_settings("heavy", s)
    # a chain of one: its breaker sees failures only (a local model's speed is no outage)
    assert isinstance(gen, FallbackGenerator) and len(gen.members) == 1
    assert gen.breakers[0].p99_ms == float("inf")
    inner = gen.members[0]
    assert isinstance(inner, RetryingGenerator) and inner.policy.max_attempts == 1  # local: no retry
    assert asyncio.run(collect_all(gen))[1].backend == "fake"
