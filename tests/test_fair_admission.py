"""Per-user limits at the admission gate: fair turns, a cap per user, a rate per user.

The gate alone first (``AdmissionGate.slot(user)``; the clock of the rate limit is a
number the test moves), then through ``Service``: with a users file the limits follow
the signed-in user across sessions and routes (web session, ``api:NAME``); without
one, each session is its own caller.
"""

import asyncio

import pytest

from specrag.pipeline.service import Service
from specrag.resilience.concurrency import AdmissionGate, BusyError
from specrag.security.users import LOCAL, Principal
from tests.support.env import make_settings
from tests.support.limits import HeldHeavy, users_file
from tests.support.resilience import FakeClock, fake_engine


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


class Crowd:
    """Tasks holding gate slots until released; ``admitted`` in the order they got in."""

    def __init__(self, gate):
        self.gate, self.admitted, self.tasks = gate, [], []
        self.release = {}

    def ask(self, user: str, tag: str):
        self.release[tag] = asyncio.Event()

        async def run():
            async with self.gate.slot(user):
                self.admitted.append(tag)
                await self.release[tag].wait()
        task = asyncio.create_task(run())
        self.tasks.append(task)
        return task


def test_a_second_users_one_question_goes_before_the_first_users_queue():
    gate = AdmissionGate(max_concurrent=2, max_queue=16, queue_timeout_s=30)

    async def scenario():
        crowd = Crowd(gate)
        for i in range(10):  # user A sends ten at once
            crowd.ask("A", f"a{i}")
        await settle()
        crowd.ask("B", "b0")  # then B sends one
        await settle()
        assert crowd.admitted == ["a0", "a1"] and gate.waiting == 9
        crowd.release["a0"].set()  # the first slot that frees goes to B, not to a2
        await settle()
        assert crowd.admitted == ["a0", "a1", "b0"]
        for event in crowd.release.values():
            event.set()
        await asyncio.gather(*crowd.tasks)
        assert crowd.admitted[3:] == [f"a{i}" for i in range(2, 10)]  # A's, in order
        assert gate.active == 0 and gate.waiting == 0

    asyncio.run(scenario())


def test_a_queue_full_of_one_users_questions_makes_room_for_another():
    gate = AdmissionGate(max_concurrent=1, max_queue=3, queue_timeout_s=30)

    async def scenario():
        crowd = Crowd(gate)
        for i in range(4):  # one answering, three waiting: the queue is full
            crowd.ask("A", f"a{i}")
        await settle()
        assert gate.waiting == 3
        b = crowd.ask("B", "b0")
        await settle()
        # A's newest waiting question gave B its place; B is not refused
        with pytest.raises(BusyError, match="took your place"):
            await crowd.tasks[3]
        assert not b.done() and gate.waiting == 3
        for event in crowd.release.values():
            event.set()
        await asyncio.gather(*crowd.tasks[:3], b)
        assert crowd.admitted == ["a0", "b0", "a1", "a2"]

    asyncio.run(scenario())


def test_one_user_holds_at_most_its_share_of_the_slots():
    gate = AdmissionGate(max_concurrent=4, max_queue=16, queue_timeout_s=30,
                         per_user_concurrent=2)

    async def scenario():
        crowd = Crowd(gate)
        for i in range(5):
            crowd.ask("A", f"a{i}")
        await settle()
        assert crowd.admitted == ["a0", "a1"] and gate.active == 2 and gate.waiting == 3
        crowd.ask("B", "b0")  # two slots are free: B needs no turn at all
        await settle()
        assert crowd.admitted == ["a0", "a1", "b0"]
        crowd.release["a0"].set()
        await settle()
        assert crowd.admitted == ["a0", "a1", "b0", "a2"]  # A's next, in A's share
        for event in crowd.release.values():
            event.set()
        await asyncio.gather(*crowd.tasks)
        assert gate.active == 0 and gate.waiting == 0

    asyncio.run(scenario())


def test_the_rate_per_user_is_a_token_bucket_with_a_retry_time():
    clock = FakeClock()
    gate = AdmissionGate(max_concurrent=1, max_queue=0, per_user_per_minute=30,
                         per_user_burst=3, clock=clock)

    async def one(user):
        async with gate.slot(user):
            pass

    async def scenario():
        for _ in range(3):  # the burst
            await one("A")
        with pytest.raises(BusyError, match="30 questions a minute") as refused:
            await one("A")
        assert refused.value.retry_after_s == pytest.approx(2.0)  # one every 2 s
        await one("B")  # B has a bucket of its own
        clock.advance(2.0)
        await one("A")
        with pytest.raises(BusyError):
            await one("A")
        # a question the gate turns away (busy) does not use up the user's allowance
        clock.advance(2.0)
        hold = asyncio.Event()

        async def holder():
            async with gate.slot("C"):
                await hold.wait()
        task = asyncio.create_task(holder())
        await settle()
        with pytest.raises(BusyError, match="queue full"):
            await one("A")
        hold.set()
        await task
        await one("A")

    asyncio.run(scenario())


def service(tmp_path, held=None, users=True, **values):
    extra = {}
    if users:
        extra["security.users_file"] = users_file(tmp_path / "users.yaml", bob="viewer",
                                                  carol="viewer")
    s = make_settings(tmp_path / "data", **extra, **values)
    return Service(s, fake_engine(s, heavy=held or HeldHeavy()))


def test_the_limits_follow_the_signed_in_user_across_sessions(tmp_path):
    svc = service(tmp_path, **{"concurrency.per_user_per_minute": 30,
                               "concurrency.per_user_burst": 2})
    bob, carol = Principal("bob", "viewer"), Principal("carol", "viewer")

    async def ask(who, session):
        return await svc.aask("Who acknowledges pages?", session=session, principal=who,
                              policy="heavy-only")

    async def scenario():
        await ask(bob, "web-1")
        await ask(bob, "api:bob")  # a key and a browser are the same user
        with pytest.raises(BusyError, match="a minute"):
            await ask(bob, "web-2")  # a new session does not reset the allowance
        assert (await ask(carol, "web-3")).text  # another user is not affected

    asyncio.run(scenario())


def test_a_users_burst_through_the_service_does_not_starve_another(tmp_path):
    held = HeldHeavy()
    svc = service(tmp_path, held, **{"concurrency.max_concurrent": 2,
                                     "concurrency.queue_timeout_s": 30,
                                     "concurrency.per_user_per_minute": 0})  # no rate limit
    bob, carol = Principal("bob", "viewer"), Principal("carol", "viewer")

    async def scenario():
        flood = [asyncio.create_task(svc.aask(f"HOLD number {i}?", session="api:bob",
                                              principal=bob, policy="heavy-only"))
                 for i in range(10)]
        while len(held.started) < 2:
            await asyncio.sleep(0.01)
        carols = asyncio.create_task(svc.aask("When does carol get an answer?",
                                              session="web-9", principal=carol,
                                              policy="heavy-only"))
        await asyncio.sleep(0.05)
        assert svc.gate.active == 2 and svc.gate.waiting == 9
        held.release(1)  # one of bob's ends: the freed slot is carol's
        assert (await carols).text
        assert held.started[2] == "When does carol get an answer?"
        held.release()
        await asyncio.gather(*flood)

    asyncio.run(scenario())


def test_without_a_users_file_each_session_is_its_own_caller(tmp_path):
    svc = service(tmp_path, users=False, **{"concurrency.per_user_per_minute": 30,
                                            "concurrency.per_user_burst": 1})

    async def ask(session, **kw):
        return await svc.aask("Who acknowledges pages?", session=session, policy="heavy-only",
                              **kw)

    async def scenario():
        await ask("tab-1", principal=LOCAL)  # the app's and the API's calls: the local user
        await ask("tab-2", principal=LOCAL)
        with pytest.raises(BusyError):
            await ask("tab-1", principal=LOCAL)
        for _ in range(3):  # the operator's own calls (library, CLI) are not rate-limited
            assert (await ask("tab-1")).text

    asyncio.run(scenario())
