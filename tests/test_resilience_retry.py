"""Retries: which failures are retried, backoff, budgets, timeouts, no repeated text."""

import random

import pytest

from specrag.generators.anthropic_backend import AnthropicGenerator
from specrag.generators.openai_compat import OpenAICompatGenerator
from specrag.resilience.attempts import AttemptsFailed
from specrag.resilience.retry import RetryBudget, RetryingGenerator, RetryPolicy
from specrag.testing.mockapi import MockAPI
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


def retrying(inner, **policy):
    sleeps = Sleeps()
    gen = RetryingGenerator(inner, RetryPolicy(**policy), RetryBudget(), sleep=sleeps,
                            rng=random.Random(7))
    return gen, sleeps


@pytest.mark.parametrize("status", [429, 500, 503, 529])
def test_retryable_status_is_retried_until_success(status):
    gen, sleeps = retrying(Scripted(plans=[err(status), err(status), "fine now [1]"]))
    pieces, usage = run(collect_all(gen))
    assert "".join(pieces) == "fine now [1]"
    assert [a.outcome for a in usage.attempts] == ["error", "error", "ok"]
    assert [a.status for a in usage.attempts] == [status, status, None]
    assert len(sleeps.calls) == 2 and gen.attempts == usage.attempts


@pytest.mark.parametrize("status", [400, 401, 403])
def test_client_errors_are_not_retried(status):
    inner = Scripted(plans=[err(status, retryable=False), "never reached"])
    gen, sleeps = retrying(inner)
    with pytest.raises(AttemptsFailed) as e:
        run(collect_all(gen))
    assert inner.calls == 1 and sleeps.calls == []
    assert len(e.value.attempts) == 1 and e.value.attempts[0].status == status
    assert "not retryable" in e.value.attempts[0].error


def test_gives_up_after_max_attempts_and_reports_each():
    gen, sleeps = retrying(Scripted(plans=[err(529)]), max_attempts=4)
    with pytest.raises(AttemptsFailed) as e:
        run(collect_all(gen))
    assert [a.status for a in e.value.attempts] == [529] * 4
    assert e.value.retryable and len(sleeps.calls) == 3


def test_backoff_is_exponential_with_full_jitter():
    p = RetryPolicy(base_delay_s=0.5, max_delay_s=3.0, multiplier=2.0)
    rng = random.Random(1)
    for retry, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (9, 3.0)]:
        delays = [p.delay(retry, rng) for _ in range(200)]
        assert 0 <= min(delays) and max(delays) <= cap
        assert max(delays) > cap * 0.8  # jitter spans the whole range


def test_retry_budget_stops_retry_storms():
    clock = FakeClock()
    budget = RetryBudget(ratio=0.0, min_retries=2, window_s=10, clock=clock)
    inner = Scripted(plans=[err(503)])
    gen = RetryingGenerator(inner, RetryPolicy(max_attempts=3), budget, sleep=Sleeps(),
                            clock=clock)
    for _ in range(3):
        with pytest.raises(AttemptsFailed):
            run(collect_all(gen))
    # 3 calls: 2 retries allowed in the window in all, not 6
    assert inner.calls == 5
    assert "retry budget exhausted" in gen.attempts[-1].error
    clock.advance(11)  # the window slides: retries are allowed again
    assert budget.try_spend()


def test_retry_budget_grows_with_traffic():
    budget = RetryBudget(ratio=0.5, min_retries=0, window_s=10, clock=FakeClock())
    for _ in range(4):
        budget.record_request()
    assert [budget.try_spend() for _ in range(3)] == [True, True, False]


def test_first_token_timeout_then_retry():
    inner = Scripted(plans=[("hang",), "after the hang [1]"])
    gen, _ = retrying(inner, first_token_timeout_s=0.05)
    pieces, usage = run(collect_all(gen))
    assert "".join(pieces) == "after the hang [1]"
    first = usage.attempts[0]
    assert first.outcome == "timeout" and first.retryable and "no first token" in first.error


def test_total_timeout_counts_as_retryable_timeout():
    inner = Scripted(plans=[("hang",)])
    gen, _ = retrying(inner, max_attempts=2, first_token_timeout_s=None, total_timeout_s=0.05)
    with pytest.raises(AttemptsFailed) as e:
        run(collect_all(gen))
    assert [a.outcome for a in e.value.attempts] == ["timeout", "timeout"]


def test_cut_stream_resumes_without_repeating_text():
    cut = ("Staff get 25", err(None, msg="stream cut"))
    gen, _ = retrying(Scripted(plans=[cut, ANSWER]))
    pieces, usage = run(collect_all(gen, MESSAGES))
    assert "".join(pieces) == ANSWER  # "Staff get 25" was shown once, then the rest
    assert [a.outcome for a in usage.attempts] == ["error", "ok"]
    assert usage.attempts[0].output_tokens == 3 and usage.attempts[0].input_tokens > 0


def test_resume_stops_when_the_retry_says_something_else():
    cut = ("Staff get 25", err(None, msg="stream cut"))
    gen, _ = retrying(Scripted(plans=[cut, "Employees have 30 days [1]"]))
    pieces = []

    async def consume():
        async for item in gen.stream(MESSAGES):
            pieces.append(item)

    with pytest.raises(AttemptsFailed) as e:
        run(consume())
    assert "".join(pieces) == "Staff get 25" and e.value.partial == "Staff get 25"
    assert [a.outcome for a in e.value.attempts] == ["error", "diverged"]


def test_buffer_mode_streams_only_a_finished_try():
    cut = ("Staff get 25", err(None, msg="stream cut"))
    gen, _ = retrying(Scripted(plans=[cut, "Employees have 30 days [1]"]),
                      after_first_token="buffer")
    pieces, usage = run(collect_all(gen))
    assert "".join(pieces) == "Employees have 30 days [1]"  # the cut try never reached us


def test_never_mode_does_not_retry_after_the_first_token():
    inner = Scripted(plans=[("Staff get", err(None)), ANSWER])
    gen, sleeps = retrying(inner, after_first_token="never")
    with pytest.raises(AttemptsFailed) as e:
        run(collect_all(gen))
    assert inner.calls == 1 and e.value.partial == "Staff get" and not e.value.retryable
    # before the first token it still retries
    gen2, _ = retrying(Scripted(plans=[err(529), ANSWER]), after_first_token="never")
    assert "".join(run(collect_all(gen2))[0]) == ANSWER


# -- against the local server speaking the real APIs ------------------------------------
@pytest.fixture
def api():
    with MockAPI(hang_s=5) as server:
        yield server


def test_anthropic_sdk_through_faults(api, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "sk-test")
    claude = AnthropicGenerator("claude-sonnet-4-6", api_key_env="TEST_KEY", base_url=api.url,
                                timeout_s=5)
    api.faults.extend(["529", "429", "cut", "malformed"])
    gen, sleeps = retrying(claude, max_attempts=5)
    pieces, usage = run(collect_all(gen, MESSAGES, max_tokens=64))
    assert "".join(pieces) == ANSWER
    assert [a.status for a in usage.attempts] == [529, 429, None, None, None]
    assert [a.outcome for a in usage.attempts] == ["error"] * 4 + ["ok"]
    assert usage.backend == "anthropic" and usage.output_tokens == len(ANSWER.split())
    assert len(api.requests) == 5


def test_openai_hang_times_out_and_retries(api):
    gen, _ = retrying(OpenAICompatGenerator("qwen", base_url=api.url + "/v1"),
                      first_token_timeout_s=0.3)
    api.faults.extend(["hang", "500"])
    pieces, usage = run(collect_all(gen, MESSAGES))
    assert "".join(pieces) == ANSWER
    assert [a.outcome for a in usage.attempts] == ["timeout", "error", "ok"]
    assert usage.attempts[1].status == 500
