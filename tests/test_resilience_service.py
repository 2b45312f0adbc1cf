"""Many questions at once: admission gate, back-pressure, per-question isolation."""

import asyncio

import pytest

from specrag.pipeline.service import Service
from specrag.resilience.concurrency import AdmissionGate, BusyError, isolated
from tests.support.env import make_settings
from tests.support.resilience import HEAVY_TEXT, Scripted, fake_engine


def test_gate_admits_queues_then_says_busy():
    gate = AdmissionGate(max_concurrent=2, max_queue=1, queue_timeout_s=30)
    release = asyncio.Event()
    admitted = []

    async def worker(i):
        async with gate.slot():
            admitted.append(i)
            await release.wait()

    async def scenario():
        tasks = [asyncio.create_task(worker(i)) for i in range(3)]
        await asyncio.sleep(0.01)
        assert admitted == [0, 1] and gate.waiting == 1  # the third waits in the queue
        with pytest.raises(BusyError, match="busy.*2 questions being answered, 1 waiting"):
            async with gate.slot():
                pass
        release.set()
        await asyncio.gather(*tasks)
        assert admitted == [0, 1, 2] and gate.active == 0 and gate.rejected == 1

    asyncio.run(scenario())


def test_gate_queue_timeout_is_busy_not_a_hang():
    gate = AdmissionGate(max_concurrent=1, max_queue=5, queue_timeout_s=0.05)

    async def scenario():
        hold = asyncio.Event()

        async def holder():
            async with gate.slot():
                await hold.wait()

        task = asyncio.create_task(holder())
        await asyncio.sleep(0.01)
        with pytest.raises(BusyError, match="waited"):
            async with gate.slot():
                pass
        hold.set()
        await task
        assert gate.waiting == 0 and gate.active == 0

    asyncio.run(scenario())


def test_isolated_runs_in_its_own_task_and_cancels_on_close():
    import contextvars

    var = contextvars.ContextVar("v", default="outside")
    closed = []

    async def gen():
        var.set("inside")  # never leaks to the consumer
        try:
            for i in range(100):
                yield i, var.get()
                await asyncio.sleep(0)
        finally:
            closed.append(True)

    async def consume():
        got = []
        agen = isolated(gen)
        async for item in agen:
            got.append(item)
            if len(got) == 3:
                break
        await agen.aclose()
        return got, var.get()

    got, outside = asyncio.run(consume())
    assert got == [(0, "inside"), (1, "inside"), (2, "inside")] and outside == "outside"
    assert closed == [True]


def test_isolated_passes_errors_on():
    async def boom():
        yield 1
        raise ValueError("nope")

    async def consume():
        return [x async for x in isolated(boom)]

    with pytest.raises(ValueError, match="nope"):
        asyncio.run(consume())


def test_many_concurrent_questions_share_the_models_without_cross_talk(tmp_path):
    s = make_settings(tmp_path, **{"concurrency.max_concurrent": 4, "concurrency.max_queue": 100})

    class EchoHeavy(Scripted):
        """Answers with the question's number: any cross-talk shows up as a wrong number."""

        async def stream(self, messages, **kw):
            n = messages[-1]["content"].split("question number ")[1].split("?")[0]
            async for item in super().stream(messages, **kw):
                if isinstance(item, str):
                    await asyncio.sleep(0.001)
                yield item
            yield f" #{n}"

    svc = Service(s, fake_engine(s, heavy=EchoHeavy("anthropic", "claude-sonnet-4-6",
                                                    [HEAVY_TEXT])))

    async def many():
        return await asyncio.gather(*[
            svc.aask(f"What is question number {i}?", session=f"user{i % 5}") for i in range(30)])

    answers = asyncio.run(many())
    for i, a in enumerate(answers):
        assert a.text.endswith(f"#{i}") and a.question == f"What is question number {i}?"
    assert svc.gate.active == 0 and svc.gate.waiting == 0
    by_session = {r["key"]: r for r in svc.usage("session")}
    assert {k: v["questions"] for k, v in by_session.items()} == {f"user{i}": 6 for i in range(5)}


def test_overload_gives_a_clear_busy_message(tmp_path):
    s = make_settings(tmp_path, **{"concurrency.max_concurrent": 1, "concurrency.max_queue": 1})
    slow = Scripted("anthropic", "claude-sonnet-4-6", [HEAVY_TEXT])
    svc = Service(s, fake_engine(s, heavy=slow))
    gate = svc._assemble().gate

    async def scenario():
        async def ask(i):
            try:
                return await svc.aask(f"How much annual leave {i}?")
            except BusyError as err:
                return err

        hold = asyncio.Event()
        # occupy the only slot and the only queue place, then a third question comes
        async def occupy():
            async with gate.slot():
                await hold.wait()

        t1 = asyncio.create_task(occupy())
        await asyncio.sleep(0.01)
        t2 = asyncio.create_task(ask(2))
        await asyncio.sleep(0.01)
        third = await ask(3)
        hold.set()
        second = await t2
        await t1
        return second, third

    second, third = asyncio.run(scenario())
    assert isinstance(third, BusyError) and "try again" in str(third)
    assert second.text == HEAVY_TEXT
