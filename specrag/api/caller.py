"""Who is calling the endpoint: a bearer API key from the users file, or the local user.

With ``security.users_file`` set, every request needs ``Authorization: Bearer KEY`` with
a key made by ``specrag users key NAME``; it acts as that user with the role and
collection ACLs the file gives them now (``security.api_keys``), so RBAC holds here as
in the app and the CLI. A missing or unknown key is a 401. Unknown keys are counted per
client address (``KeyThrottle``, given by the app): after a few, that address gets a
429 with ``Retry-After`` for a while, before any key it sends is looked up.

With no users file specrag is a single-user local tool, and so is its endpoint: a
request from a loopback address is the local admin (``LOCAL``) with or without a key,
any other is refused (401), whatever address the server listens on. A request that
carries proxy headers (``Forwarded``, ``X-Forwarded-For``, ``X-Real-IP``) counts as
remote: a reverse proxy on the same host would otherwise make every client local. To
serve other machines, create a users file and give each caller a key.

Deliberately not here: the rules themselves (``access``), keys and their storage
(``api_keys``, ``users``), the throttle's counting (``throttle``).
"""

from __future__ import annotations

import ipaddress
import math

from specrag.api.errors import ApiError
from specrag.security.access import AccessControl
from specrag.security.api_keys import principal_for_key
from specrag.security.throttle import KeyThrottle, Refused
from specrag.security.users import LOCAL, Principal
from specrag.types import SpecragError, one_line

PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


def caller(control: AccessControl, headers, client_host: str | None,
           keys: KeyThrottle | None = None) -> Principal:
    """The principal of a request, from its headers and its peer address; ``keys``
    throttles unknown keys per peer address."""
    if not control.enabled:
        if _loopback(client_host) and not any(h in headers for h in PROXY_HEADERS):
            return LOCAL
        raise ApiError(401, "this specrag has no users file (security.users_file), so its API "
                            "answers loopback clients only; add users and give each an API "
                            "key ('specrag users key NAME') to serve other machines",
                       "invalid_request_error", "invalid_api_key")
    if keys is not None:
        try:
            keys.check(client_host or "")
        except Refused as err:
            raise ApiError(429, str(err), "rate_limit_error", "rate_limited",
                           headers={"Retry-After": str(max(1, math.ceil(err.retry_after)))}) \
                from None
    scheme, _, key = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise ApiError(401, "no API key: send 'Authorization: Bearer KEY' with a key from "
                            "'specrag users key NAME'", code="invalid_api_key")
    try:
        directory = control.directory()
    except SpecragError as err:  # a users file that is gone or broken: the server's fault
        raise ApiError(500, one_line(err), "server_error") from None
    who = principal_for_key(directory, key.strip())
    if who is None:
        if keys is not None:
            keys.failed(client_host or "")
        raise ApiError(401, "Incorrect API key provided", code="invalid_api_key")
    return who


def _loopback(host: str | None) -> bool:
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:  # "testclient", a unix socket: not a loopback address
        return False
