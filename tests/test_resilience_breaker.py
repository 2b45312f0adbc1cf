"""The circuit breaker: opens on rolling p99 or consecutive failures, half-open probes close it."""

from specrag.resilience.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker, p99
from tests.support.resilience import FakeClock


def breaker(clock, **kw):
    opts = dict(p99_ms=2000, window=100, window_s=60, min_samples=10, failures=5, open_s=30)
    opts.update(kw)
    return CircuitBreaker("primary", clock=clock, **opts)


def test_p99_is_nearest_rank():
    assert p99([]) is None
    assert p99(range(1, 101)) == 99
    assert p99([5] * 99 + [5000]) == 5 and p99([5] * 98 + [5000] * 2) == 5000
    assert p99([5] * 9 + [5000]) == 5000  # with few samples p99 is the maximum


def test_opens_when_rolling_p99_exceeds_threshold_then_probe_closes_it():
    clock = FakeClock()
    b = breaker(clock)
    for _ in range(9):
        b.record(300, True)
    b.record(2500, True)  # 10 samples, p99 = 2500 ms > 2000 ms
    assert b.state == OPEN and not b.allow()
    assert "p99 2500 ms" in b.transitions[-1].reason
    clock.advance(29)
    assert not b.allow()
    clock.advance(1)  # open_s elapsed
    assert b.state == HALF_OPEN
    assert b.allow() and not b.allow()  # one probe at a time
    b.record(400, True)
    assert b.state == CLOSED and b.allow()
    assert [t.new for t in b.transitions] == [OPEN, HALF_OPEN, CLOSED]
    assert b.p99_ms_now() is None  # a fresh window after closing


def test_needs_min_samples_before_judging_latency():
    b = breaker(FakeClock())
    for _ in range(9):
        b.record(5000, True)
    assert b.state == CLOSED
    b.record(5000, True)
    assert b.state == OPEN


def test_slow_or_failed_probe_opens_it_again():
    clock = FakeClock()
    b = breaker(clock, min_samples=1)
    b.record(3000, True)
    assert b.state == OPEN
    clock.advance(30)
    assert b.allow()
    b.record(2600, True)  # still slow
    assert b.state == OPEN and not b.allow()
    clock.advance(30)
    assert b.allow()
    b.record(100, False)  # fast but failed
    assert b.state == OPEN
    clock.advance(30)
    assert b.allow()
    b.record(100, True)
    assert b.state == CLOSED


def test_consecutive_failures_open_it_and_a_success_resets_the_count():
    b = breaker(FakeClock())
    for _ in range(4):
        b.record(50, False)
    b.record(50, True)
    for _ in range(4):
        b.record(50, False)
    assert b.state == CLOSED
    b.record(50, False)
    assert b.state == OPEN and "5 consecutive failures" in b.transitions[-1].reason


def test_old_samples_leave_the_window():
    clock = FakeClock()
    b = breaker(clock, min_samples=3, window_s=60)
    b.record(5000, True)
    clock.advance(61)  # the slow sample is now too old to count
    b.record(100, True)
    b.record(100, True)
    b.record(100, True)
    assert b.state == CLOSED and b.p99_ms_now() == 100


def test_a_cancelled_probe_frees_its_slot():
    clock = FakeClock()
    b = breaker(clock, min_samples=1, probes=1)
    b.record(9000, True)
    clock.advance(30)
    assert b.allow() and not b.allow()
    b.release()
    assert b.allow()
