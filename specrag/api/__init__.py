"""specrag's OpenAI-compatible HTTP API, so any OpenAI client or chat UI can use it.

- ``app``: ``create_app(settings, engine=None)`` (a FastAPI app: ``specrag serve``) and
  ``openai_routes(settings, engine=None)`` (the same routes as a ``Mount("/v1")`` for the
  Gradio app): ``POST /v1/chat/completions`` and ``GET /v1/models``.
- ``wire``: the request and response shapes; a model id ``specrag:COLLECTION`` names
  the collection, the messages carry the question and the conversation.
- ``stream``: what a streaming client sees (the draft as ``reasoning_content``, the
  final answer as ``content``, the ``specrag`` extras in the last chunk).
- ``caller``: bearer API keys from the users file; loopback-only without one.
- ``errors``: OpenAI's error JSON with 400/401/403/404/429/503.

Deliberately not here: the pipeline (``specrag.pipeline``), users and keys
(``specrag.security``).
"""

from specrag.api.app import create_app, openai_routes

__all__ = ["create_app", "openai_routes"]
