"""The endpoint's errors in OpenAI's shape: ``{"error": {message, type, param, code}}``.

``ApiError(status, message, type_, code)`` is raised by the request's checks (auth,
model, body) and turned into that JSON with its status; ``from_exception`` maps what
the library raises: ``PermissionDenied`` 403, ``BusyError`` 429 with ``Retry-After``,
``BudgetExceeded`` 429 ``insufficient_quota``, a failed model (``GenerationError``,
``ModelUnavailable``) 503, any other ``SpecragError`` (an empty or too long question, a
bad policy) 400, and anything else 500 with a generic line (the details go to the log,
not to the caller). A library message never shows a URL (``scrub``): "http://gpu:8000/v1:
ConnectError" reaches the caller as "the model server: ConnectError", so where the models
run stays the operator's (the log keeps the URL). OpenAI's clients read the status into
their own exception classes (``AuthenticationError``, ``PermissionDeniedError``, ...).

Deliberately not here: deciding who may do what (``specrag.security.access``).
"""

from __future__ import annotations

import logging
import math
import re

from specrag.generators.base import GenerationError
from specrag.observability.budget import BudgetExceeded
from specrag.resilience.concurrency import BusyError
from specrag.security.access import PermissionDenied
from specrag.types import ModelUnavailable, SpecragError, one_line

log = logging.getLogger(__name__)

# a scheme, then up to a space or a quote; a colon or full stop after it is the sentence's
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s,;'\"()<>]*[^\s,;'\"()<>:.]", re.I)


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.type = status, message, type_
        self.code, self.param, self.headers = code, param, headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def scrub(message: str) -> str:
    """``message`` with every URL replaced by "the model server"."""
    return _URL.sub("the model server", message)


def from_exception(err: BaseException) -> ApiError:
    if isinstance(err, ApiError):
        return err
    line = scrub(one_line(err))
    if isinstance(err, PermissionDenied):
        return ApiError(403, line, "permission_error", "permission_denied")
    if isinstance(err, BusyError):
        wait = max(1, math.ceil(err.retry_after_s))
        return ApiError(429, line, "rate_limit_error", "busy", headers={"Retry-After": str(wait)})
    if isinstance(err, BudgetExceeded):
        return ApiError(429, line, "insufficient_quota", "budget_exceeded")
    if isinstance(err, (GenerationError, ModelUnavailable)):
        log.warning("answer failed: %s", one_line(err))  # the operator's copy keeps the URL
        return ApiError(503, line, "server_error", "model_unavailable")
    if isinstance(err, SpecragError):
        return ApiError(400, line)
    log.exception("chat completion failed", exc_info=err)
    return ApiError(500, "internal error: the server log has the details", "server_error")
