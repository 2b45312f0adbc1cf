"""Per-user limits on the OpenAI-compatible endpoint, through the ``openai`` client and a
real uvicorn server on loopback: a flood of bad keys is throttled per client address,
one key's burst does not refuse another user's question, and a key over its rate gets
a 429 with ``Retry-After``.

The engine is the real one over fake models (``tests.support.limits``): a question that
says ``HOLD`` waits in the heavy tier until the test releases it.
"""

import threading
import time

import httpx
import openai
import pytest

from specrag.api import create_app
from specrag.security import api_keys
from specrag.security.throttle import PER_ADDRESS_KEYS, KeyThrottle, Refused
from tests.support.env import make_settings
from tests.support.limits import ANSWER, held_service, serve, users_file
from tests.support.resilience import FakeClock

HEAVY = {"specrag_policy": "heavy-only"}


@pytest.fixture
def api(tmp_path):
    """start(**settings) -> (url, service, held heavy, keys by user name)."""
    servers = []

    def start(**values):
        path = users_file(tmp_path / "users.yaml", bob="viewer", carol="viewer")
        s = make_settings(tmp_path / "data", **{"security.users_file": path, **values})
        service, held = held_service(s)
        url, server = serve(create_app(s, service))
        servers.append((server, held))
        keys = {name: api_keys.issue(path, name)[1] for name in ("bob", "carol")}
        return url, service, held, keys

    yield start
    for server, held in servers:
        held.release()
        server.should_exit = True


def client(url, key, local_address=None) -> openai.OpenAI:
    http = httpx.Client(transport=httpx.HTTPTransport(local_address=local_address)) \
        if local_address else None
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60, http_client=http)


def ask(url, key, question="Who acknowledges pages?"):
    return client(url, key).chat.completions.create(
        model="specrag:handbook", messages=[{"role": "user", "content": question}],
        extra_body=HEAVY)


def test_the_bad_key_count_is_per_address_and_drains_over_time():
    clock = FakeClock()
    keys = KeyThrottle(clock)
    for _ in range(int(PER_ADDRESS_KEYS.capacity)):
        keys.check("198.51.100.7")
        keys.failed("198.51.100.7")
    with pytest.raises(Refused) as refused:
        keys.check("198.51.100.7")
    assert refused.value.retry_after == pytest.approx(PER_ADDRESS_KEYS.leak_s)
    keys.check("198.51.100.8")  # another address
    clock.advance(PER_ADDRESS_KEYS.leak_s)
    keys.check("198.51.100.7")  # one more try after one leak period ...
    keys.failed("198.51.100.7")
    with pytest.raises(Refused):  # ... and no more
        keys.check("198.51.100.7")


def test_a_flood_of_bad_keys_is_refused_without_checking_them(api):
    url, _, _, keys = api()
    for i in range(int(PER_ADDRESS_KEYS.capacity)):
        with pytest.raises(openai.AuthenticationError):
            client(url, f"sk-specrag-guess-{i}").models.list()
    with pytest.raises(openai.RateLimitError) as refused:
        client(url, "sk-specrag-guess-next").models.list()
    assert refused.value.status_code == 429 and "bad API keys" in refused.value.message
    assert int(refused.value.response.headers["Retry-After"]) >= 1
    with pytest.raises(openai.RateLimitError):  # while throttled, even a good key waits
        client(url, keys["bob"]).models.list()
    # another address is not affected: the count is per client address
    assert client(url, keys["bob"], local_address="127.0.0.2").models.list().data


def test_one_keys_burst_does_not_refuse_another_users_question(api):
    url, service, held, keys = api(**{"concurrency.queue_timeout_s": 5,
                                      "concurrency.per_user_per_minute": 0})
    results, errors = [], []

    def flood(i):
        try:
            stream = client(url, keys["carol"]).chat.completions.create(
                model="specrag:handbook", stream=True, extra_body=HEAVY,
                messages=[{"role": "user", "content": f"HOLD number {i}?"}])
            results.append("".join(c.choices[0].delta.content or "" for c in stream
                                   if c.choices))
        except Exception as err:  # noqa: BLE001 - the assertion below shows it
            errors.append(err)

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    while not service.gate or service.gate.active + service.gate.waiting < 10:  # all in
        assert time.time() < deadline and not errors, errors
        time.sleep(0.02)
    assert service.gate.active == 2  # carol's share; the other two slots stay free
    done = ask(url, keys["bob"])
    assert done.choices[0].message.content == ANSWER
    held.release()
    for t in threads:
        t.join(60)
    assert errors == [] and results == [ANSWER] * 10


def test_a_key_over_its_rate_gets_429_with_retry_after(api):
    url, _, _, keys = api(**{"concurrency.per_user_per_minute": 30,
                             "concurrency.per_user_burst": 2})
    for _ in range(2):
        assert ask(url, keys["bob"]).choices[0].message.content == ANSWER
    with pytest.raises(openai.RateLimitError) as refused:
        ask(url, keys["bob"])
    assert "30 questions a minute" in refused.value.message
    assert refused.value.response.headers["Retry-After"] == "2"
    assert ask(url, keys["carol"]).choices[0].message.content == ANSWER
