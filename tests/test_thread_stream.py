"""``stream_from_thread``: a worker thread's tokens reach the loop; stopping early is clean."""

import asyncio
import threading
import time

from specrag.generators.base import stream_from_thread


def slow_tokens(stop, produced):
    for i in range(50):
        if stop.is_set():
            return
        produced.append(i)
        time.sleep(0.01)
        yield f"t{i}"


def test_tokens_arrive_in_order_and_errors_reach_the_consumer():
    async def collect(produce):
        return [x async for x in stream_from_thread(produce)]

    assert asyncio.run(collect(lambda stop: iter(["a", "b", "c"]))) == ["a", "b", "c"]

    def broken(stop):
        yield "a"
        raise ValueError("model crashed")

    try:
        asyncio.run(collect(broken))
    except ValueError as err:
        assert "model crashed" in str(err)
    else:
        raise AssertionError("the worker's error was swallowed")


def test_a_consumer_that_stops_early_stops_the_worker_without_errors():
    errors, produced = [], []
    old = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    try:
        async def first_two():
            out = []
            async for tok in stream_from_thread(lambda stop: slow_tokens(stop, produced)):
                out.append(tok)
                if len(out) == 2:
                    break
            return out

        assert asyncio.run(first_two()) == ["t0", "t1"]  # the loop is closed right after
        time.sleep(0.2)  # the worker notices within a token or two
        assert len(produced) < 10
    finally:
        threading.excepthook = old
    assert errors == []  # no "Event loop is closed" from the worker thread
