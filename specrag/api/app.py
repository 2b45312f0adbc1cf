"""The OpenAI-compatible endpoint: ``POST /v1/chat/completions`` and ``GET /v1/models``.

``create_app(settings, engine=None)`` is a FastAPI app with the two routes (``specrag
serve`` runs it under uvicorn); ``openai_routes(settings, engine=None)`` is the same app
as one ``Mount("/v1")``, for another app's route list (the Gradio app's
``launch(app_kwargs={"routes": ...})``). ``engine`` is a ``Service`` or an engine, or a
function returning one (called once, off the event loop, on the first request: the
Gradio app's ``demo.specrag_engines.base`` shares its models and ledger); None builds
the composition root's ``build_service(settings)``. Models load on the first question.

Each request: the caller (``caller``: bearer key or the local user) -> the body
(``wire``) -> may that user read the model's collection (403, checked before whether
it exists, so names one may not read stay hidden) -> does it exist (404) -> the
question with the conversation as ``history`` (``pipeline.followup`` rewrites a
follow-up into a standalone question), ``principal`` (the engine checks the ACL again,
as on every path) and, for a ``Service``, the session ``api:USER`` (its ledger rows and
budget). Streaming
(``stream``) answers as server-sent events; the first event is awaited before the
response starts, so a refusal (busy, budget, ACL) is still an HTTP status. A client
that disconnects cancels the question and its model calls, streamed or not: while a
plain answer (or a stream's first event) is awaited, a task beside it waits for the
ASGI ``http.disconnect`` and cancels it, which frees its admission slot.

The body is read by ``body.read_json``: at most ``MAX_BODY`` bytes (a larger
``Content-Length`` is refused unread), within ``security.read_timeout_s``.

Deliberately not here: the wire format (``wire``, ``stream``), auth (``caller``),
the pipeline (``pipeline``): nothing is decided here that the library decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from specrag.api import wire
from specrag.api.body import CLOSE, read_json
from specrag.api.caller import KeyThrottle, caller
from specrag.api.errors import ApiError, from_exception
from specrag.api.stream import ChunkStream
from specrag.pipeline.build import build_service
from specrag.pipeline.service import Service
from specrag.retrieval.store import Store
from specrag.security.access import AccessControl
from specrag.settings import Settings

MAX_BODY = 1 << 20  # bytes: a conversation, not a document upload

log = logging.getLogger(__name__)


class Answers:
    """The engine behind the routes, resolved once, and what it can be asked."""

    def __init__(self, settings: Settings, engine=None):
        self.settings = settings
        self._source = engine
        self._engine = None
        self._store = None  # where the collections are listed: the engine's own store
        self._lock = threading.Lock()

    async def engine(self):
        if self._engine is None:  # building opens the store, which may block: a thread
            await asyncio.to_thread(self._resolve)
        return self._engine

    def _resolve(self) -> None:
        with self._lock:
            if self._engine is not None:
                return
            source = self._source
            if source is None:
                source = build_service(self.settings)
            elif not hasattr(source, "astream"):
                source = source()
            inner = source.engine if isinstance(source, Service) else source
            self._store = getattr(getattr(inner, "retriever", None), "store", None)
            if self._store is None:  # an engine over a stand-in retriever (tests)
                self._store = Store(self.settings)
            self._engine = source

    async def collections(self) -> list[str]:
        await self.engine()
        return await asyncio.to_thread(self._store.collections)

    async def events(self, req: wire.ChatRequest, who):
        engine = await self.engine()
        kw = {"policy": req.policy, "collection": req.collection, "principal": who,
              "history": [dict(t) for t in req.history]}
        if isinstance(engine, Service):
            kw["session"] = f"api:{who.name}"
        async for event in engine.astream(req.question, **kw):
            yield event


def create_app(settings: Settings, engine=None, *, prefix: str = "/v1") -> FastAPI:
    answers = Answers(settings, engine)
    control = AccessControl(settings)
    keys = KeyThrottle()  # unknown API keys per client address
    app = FastAPI(title="specrag", docs_url=None, redoc_url=None, openapi_url=None)

    def who(request: Request):
        return caller(control, request.headers, request.client.host if request.client else None,
                      keys)

    def refused(err: BaseException, unread: bool = False) -> JSONResponse:
        e = from_exception(err)
        # a body left unread (a bad key, a refusal before reading): drop the connection
        # rather than have the server read and discard the rest
        headers = {**e.headers, **CLOSE} if unread else e.headers
        return JSONResponse(e.body(), status_code=e.status, headers=headers)

    @app.get(prefix + "/models")
    async def models(request: Request):
        try:
            user = who(request)
            readable = control.readable(user, await answers.collections())
        except Exception as err:  # noqa: BLE001 - every failure answers in OpenAI's shape
            return refused(err)
        ids = [wire.model_id(c) for c in readable]
        if settings.store.collection in readable:
            ids.insert(0, wire.DEFAULT_MODEL)
        return JSONResponse({"object": "list", "data": [
            {"id": i, "object": "model", "created": 0, "owned_by": "specrag"} for i in ids]})

    @app.post(prefix + "/chat/completions")
    async def chat(request: Request):
        body = None
        try:
            user = who(request)
            body = await read_json(request, MAX_BODY, settings.security.read_timeout_s)
            req = wire.parse_chat(body, settings.store.collection,
                                  request.query_params.get("policy"))
            control.check(user, "read", req.collection)
            if req.collection not in await answers.collections():
                raise ApiError(404, f"The model '{req.model}' does not exist: no collection "
                                    f"'{req.collection}'", code="model_not_found", param="model")
            events = answers.events(req, user)
            cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
            if not req.stream:
                answer = await _unless_gone(request, _final(events))
                return JSONResponse(wire.completion(cid, created, req.model, answer))
            first = await _unless_gone(request, anext(events))
        except Exception as err:  # noqa: BLE001 - every failure answers in OpenAI's shape
            return refused(err, unread=body is None)
        chunks = ChunkStream(cid, created, req.model, req.include_usage)
        return StreamingResponse(_sse(first, events, chunks), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return app


def openai_routes(settings: Settings, engine=None) -> list:
    """``create_app`` mounted at ``/v1``: routes to put in front of another app's."""
    from starlette.routing import Mount

    return [Mount("/v1", app=create_app(settings, engine, prefix=""))]


async def _final(events):
    answer = None
    async with contextlib.aclosing(events):
        async for event in events:
            answer = event.answer if event.kind == "final" else answer
    return answer


async def _unless_gone(request, awaitable):
    """What ``awaitable`` gives, unless the client disconnects first: then it is
    cancelled (the question with it) and the caller gets an ``ApiError`` nobody reads."""
    work = asyncio.ensure_future(awaitable)
    gone = asyncio.ensure_future(_disconnect(request.receive))
    try:
        await asyncio.wait((work, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when this request itself is cancelled (the server stopping)
        gone.cancel()
        if not work.done():
            work.cancel()
            await asyncio.wait((work,))  # its cleanup (the slot, the model calls) runs now
    if work.cancelled():
        log.info("the client disconnected: its question was cancelled")
        raise ApiError(400, "the client disconnected before the answer", code="client_gone")
    return work.result()


async def _disconnect(receive) -> None:
    # the body has been read: the next ASGI message is the client's going away
    while (await receive())["type"] != "http.disconnect":
        pass


async def _sse(first, events, chunks: ChunkStream):
    def frame(data: dict) -> str:
        return f"data: {json.dumps(data)}\n\n"

    # aclosing: a client that goes away closes the events, which cancels the question
    async with contextlib.aclosing(events):
        for c in chunks.start() + chunks.on(first):
            yield frame(c)
        try:
            async for event in events:
                for c in chunks.on(event):
                    yield frame(c)
        except Exception as err:  # noqa: BLE001 - the status is sent: an error event instead
            yield frame(from_exception(err).body())
            return
    yield "data: [DONE]\n\n"
