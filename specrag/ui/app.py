"""The Gradio app: chat with an instant draft, its verdict and the heavy fallback; documents.

``build(settings=None, engine=None, sample=True)`` assembles the tabs from the ``ui``
modules and returns the ``gr.Blocks``; ``launch_options(settings)`` gives what
``launch()`` needs: stylesheet and theme, the upload size limit
(``chunking.max_file_mb``), specrag's gate in front of Gradio's routes (``gate``:
live sessions only, uploads bound to their sender, none from viewers) and the login
when a users file is configured.
With ``engine=None`` the app's engine is a resilient ``Service`` (admission gate,
budgets, usage ledger, failover tiers, quality audit; ``pipeline.build``), built
lazily: its models load in the background when a browser opens the page, or on the
first question (an API caller), so the app starts in seconds. Tests
inject a ``SpeculativeRAG`` or a ``Service`` made of fakes. On first start the sample
handbook is ingested into the ``handbook`` collection in the background if that
collection is empty.

API endpoints (``gradio_client``), stable: ``/chat`` (question, collection, policy ->
``Answer.to_dict()``), ``/ingest`` (files, collection -> summary, per-file rows,
documents), ``/delete`` (document, collection -> message, documents), ``/search``
(query, collection, k -> status, hits), ``/metrics`` (-> usage and audit, a dict).

Users: with ``security.users_file`` set, ``launch(**launch_options(settings))`` adds the
login, and every handler passes the request's user (``principal_from_request``) to the
library, which checks the collection ACLs itself; the Metrics tab is for admins. With no
users file everyone is the local admin and there is no login, as before.

Sources: a citation's or a verified sentence's "view source" opens the viewer drawer
(``viewer``): a PDF's page rendered with the passage highlighted (the app's ingestor
keeps each PDF's original for it, ``ingest.originals``), other formats the passage in
its surrounding text; only for users who may read the collection.

Errors: an API call that cannot be answered (a question that is not text or is longer
than ``security.max_question_chars``, a collection the user may not read, a busy
engine) raises ``gr.Error`` with one plain line (``AppError`` in ``gradio_client``);
nothing is cut short silently.

Several users at once: every chat event gets its own ``ChatSession`` (``gr.State``) and
passes its session's settings with the question; the engine is shared but keeps no
per-question state between calls. The Gradio session hash is the ledger's and the
budget's session.

Deliberately not here: rendering (``chat``, ``charts``), tab contents (``documents``,
``search``, ``panel``), engine and pipeline logic (``specrag.pipeline.engine``).
"""

# no ``from __future__ import annotations``: Gradio reads the ``gr.Request`` hints of the
# handlers at runtime, and ``gr`` is imported inside ``build``, not at module level
import asyncio
import logging
from pathlib import Path

from specrag.ingest.originals import KeepingIngestor
from specrag.ingest.sample import COLLECTION, EASY, HARD, SampleKB, operator
from specrag.retrieval.retriever import Retriever
from specrag.retrieval.store import Store
from specrag.security.access import PermissionDenied
from specrag.security.sanitize import check_question
from specrag.settings import Settings
from specrag.types import SpecragError, one_line
from specrag.ui import charts, documents, metrics, panel, search, tuning, viewer
from specrag.ui.auth import gradio_auth, principal_from_request
from specrag.ui.gate import Gate
from specrag.ui.session import ChatSession, Engines, Options, follow, inner_engine, stream
from specrag.ui.turn import Turn

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"
# Answers mostly wait on models (local ones serialise on their own lock, remote ones
# overlap), so a few at once keeps the page responsive without oversubscribing 2 cores.
CONCURRENCY = 4
SAMPLE_WAIT_S = 600  # a first question may wait this long for the sample ingestion

log = logging.getLogger(__name__)


def css() -> str:
    path = ASSETS / "style.css"
    return path.read_text() if path.exists() else ""


def launch_options(settings: Settings | None = None, demo=None) -> dict:
    """Keyword arguments for ``launch()``: Gradio 6 takes css and theme there, the upload
    limit, the gate, the login (``auth``) when ``settings`` name a users file, and, given
    the ``demo`` from ``build``, the OpenAI-compatible routes over its own engine
    (``specrag.api``: same models, ledger and admission gate as the chat)."""
    import gradio as gr
    from starlette.middleware import Middleware


    settings = settings or Settings()

    # system fonts only: the default theme would fetch web fonts, which offline hosts lack.
    # As ``Font`` objects, not strings: Gradio compares themes font by font (its launch
    # analytics did, and crashed on a string), so a theme must hold what it expects
    font = gr.themes.Font
    theme = gr.themes.Soft(primary_hue="blue", neutral_hue="slate",
                           font=[font(n) for n in ("Inter", "system-ui", "Segoe UI", "sans-serif")],
                           font_mono=[font(n) for n in ("ui-monospace", "SFMono-Regular",
                                                        "monospace")])
    options = {"css": css(), "theme": theme,
               # Gradio refuses (413) a larger upload while it streams in, before any handler
               "max_file_size": int(settings.chunking.max_file_mb * 1024 * 1024),
               # the gate must see each request from the client itself: no Node front
               # server (SSR) relaying it, no static workers taking uploads past it
               "ssr_mode": False,
               "app_kwargs": {"middleware": [Middleware(Gate, settings=settings)]}}
    auth = gradio_auth(settings)
    if auth is not None:
        options.update(auth=auth, auth_message="Sign in with your specrag user.")
    if demo is not None:
        from specrag.api import openai_routes  # heavy: FastAPI, only when the API is mounted

        # the engine is built on the first call, its models on the first question
        options["app_kwargs"]["routes"] = openai_routes(settings, demo.specrag_engines.base)
    return options


def header_html() -> str:
    logo = ASSETS / "logo.svg"
    svg = logo.read_text() if logo.exists() else "<b>specrag</b>"  # our own file, not user data
    return (f'<div class="sr-brand">{svg}<p>Speculative RAG: a small model drafts from a broad '
            "set of passages, a verifier checks every sentence, and only a rejected draft "
            "goes to the heavy model.</p></div>")


def _retriever_of(engine) -> Retriever | None:
    """The engine's own ``Retriever``, to share its store and embedder."""
    retriever = getattr(inner_engine(engine), "retriever", None)
    return retriever if isinstance(retriever, Retriever) else None


def build(settings: Settings | None = None, engine=None, sample: bool = True):
    import gradio as gr

    settings = settings or (engine.settings if engine is not None else Settings.load()[0])
    retriever = _retriever_of(engine)  # share one embedder and store with ingestion
    store = retriever.store if retriever else Store(settings)
    # keeps each PDF's original (encrypted with security.encrypt) for the source viewer
    ingestor = KeepingIngestor(settings, embedder=retriever.embedder if retriever else None,
                               store=store)
    retriever = retriever or Retriever(settings, embedder=ingestor.embedder, store=store)
    engines = Engines(settings, engine, retriever)
    kb = SampleKB(ingestor, principal=operator(settings))
    if not sample:
        kb.skip()
    elif kb.principal is None:
        kb.skip("the users file lists no admin to ingest it as")
    else:
        kb.start()
    default = COLLECTION if sample else settings.store.collection
    lib = documents.Library(settings, ingestor, default=default)

    def who(request):
        """The request's signed-in user (the local admin when no users are configured)."""
        try:
            return principal_from_request(request, settings)
        except PermissionDenied as err:
            raise gr.Error(str(err)) from None

    async def respond(question, collection, session, policy, threshold, top_k, draft_k,
                      heavy_k, answer_threshold, request: gr.Request):
        session = session or ChatSession()
        question = " ".join((question or "").split())  # never cut: the engine refuses long ones
        if not question:
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        turn = Turn(question)
        if not engines.warm:
            turn.note = "loading the models (first question only)…"
        yield session.html(turn), "", gr.skip(), gr.skip(), gr.skip()
        try:
            me = principal_from_request(request, settings)
            if collection == kb.collection and not kb.ready:
                await asyncio.to_thread(kb.wait, SAMPLE_WAIT_S)
            opts = Options(policy, threshold, top_k, draft_k, heavy_k, answer_threshold)
            engine = await asyncio.to_thread(engines.view, opts)
            # the conversation so far: a follow-up is rewritten into a standalone question
            events = stream(engine, question, request.session_hash, policy=policy or None,
                            collection=collection, principal=me, history=session.history)
            async for t in follow(events, turn):
                yield session.html(t), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        except SpecragError as err:  # e.g. BusyError, BudgetExceeded, PermissionDenied
            turn.error = one_line(err)
        except Exception as err:  # noqa: BLE001 - shown in the turn; the session goes on
            log.exception("answering %r failed", question)
            turn.error = f"Something went wrong: {type(err).__name__}: {str(err)[:300]}"
        session.finish(turn)
        yield (session.html(), gr.skip(), session, charts.figure(session.points),
               charts.stats_markdown(session.points))

    async def chat(question: str, collection: str = default, policy: str = "",
                   history: list | None = None, request: gr.Request = None) -> dict:
        """Answer a question from a collection; returns the answer as a dict (see README).
        ``history``: the conversation so far, ``[{"role": "user"|"assistant", "content"}]``."""
        answer = None
        try:
            # refused, never cut, before anything else reads it (the engine checks too)
            question = " ".join(check_question(question,
                                               settings.security.max_question_chars).split())
            for name, value in (("collection", collection), ("policy", policy)):
                if value is not None and not isinstance(value, str):
                    raise SpecragError(f"the {name} must be text, not {type(value).__name__}")
            me = principal_from_request(request, settings)
            if collection == kb.collection:
                await asyncio.to_thread(kb.wait, SAMPLE_WAIT_S)
            engine = await asyncio.to_thread(engines.warm_up)
            async for ev in stream(engine, question, getattr(request, "session_hash", None),
                                   policy=policy or None, collection=collection or None,
                                   principal=me, history=history or None):
                answer = ev.answer if ev.kind == "final" else answer
        except SpecragError as err:  # e.g. BusyError, BudgetExceeded, PermissionDenied
            raise gr.Error(one_line(err)) from None
        except Exception as err:  # a bug, not the caller's fault: logged, a plain line out
            log.exception("answering %r failed", question)
            raise gr.Error(f"something went wrong: {type(err).__name__}") from None
        if answer is None:
            raise gr.Error("no answer came back; try again")
        return answer.to_dict()

    async def on_load(collection, request: gr.Request):
        await asyncio.to_thread(kb.wait, SAMPLE_WAIT_S)
        engines.prepare(collection)  # models and warm draft prompts while the user types
        return (*refresh_docs(collection, request),
                gr.update(visible=metrics.allowed(settings, who(request))))

    # no usage reports to Gradio's servers, whatever GRADIO_ANALYTICS_ENABLED says: the app
    # answers from private documents and must not phone home (nor wait on a closed network)
    with gr.Blocks(title="specrag · speculative RAG", analytics_enabled=False) as demo:
        with gr.Row(elem_id="sr-header", equal_height=True):
            with gr.Column(scale=4):
                gr.HTML(header_html(), elem_id="sr-brand-box")
            collection = gr.Dropdown(lib.collections(), value=default, label="Collection",
                                     allow_custom_value=True, scale=1, min_width=200,
                                     elem_id="sr-collection",
                                     info="type a new name to create one")
        session = gr.State(ChatSession())
        with gr.Tabs(elem_id="sr-tabs"):
            with gr.Tab("Chat", id="chat"):
                with gr.Row(equal_height=False):
                    with gr.Column(scale=7, elem_id="sr-main"):
                        conversation = gr.HTML(ChatSession().html(), elem_id="sr-conversation",
                                               js_on_load=viewer.JS_ON_LOAD, autoscroll=True,
                                               min_height=420, max_height="66vh")
                        with gr.Row(equal_height=True, elem_id="sr-ask-row"):
                            question = gr.Textbox(show_label=False, scale=8, max_lines=4,
                                                  elem_id="sr-question", autofocus=True,
                                                  placeholder="Ask about the documents…")
                            ask = gr.Button("Ask", variant="primary", scale=1,
                                            elem_id="sr-ask", min_width=90)
                        gr.Examples([[q] for q in EASY], question, elem_id="sr-ex-easy",
                                    label="Single facts: the draft usually gets these")
                        gr.Examples([[q] for q in HARD], question, elem_id="sr-ex-hard",
                                    label="Several passages combined: usually the heavy model")
                    with gr.Column(scale=4, elem_id="sr-side", min_width=320):
                        stats = gr.Markdown(charts.stats_markdown([]), elem_id="sr-stats")
                        plot = gr.Plot(charts.figure([]), show_label=False, elem_id="sr-chart")
            with gr.Tab("Documents", id="documents"):
                refresh_docs, doc_outputs = documents.build_tab(lib, collection, gr, who)
                tuning.build_section(tuning.Tuner(settings, engines), collection, gr, who)
            with gr.Tab("Search", id="search"):
                search.build_tab(retriever, collection, settings.retrieval.top_k, gr, who)
            with gr.Tab("Settings", id="settings") as settings_tab:
                options, models = panel.build_tab(settings, engines, gr)
            # admins only with a users file: shown by ``on_load`` to those who may see it
            with gr.Tab("Metrics", id="metrics", visible=metrics.allowed(settings, None),
                        elem_id="sr-metrics") as metrics_tab:
                show_metrics, metrics_outputs = metrics.build_tab(engines, settings, gr, who)

        viewer.build_panel(viewer.SourceViewer(settings, store, ingestor.originals),
                           conversation, gr, who)
        inputs = [question, collection, session, *options]
        outputs = [conversation, question, session, plot, stats]
        # one event for both triggers: a second Enter while an answer streams is ignored
        gr.on([question.submit, ask.click], respond, inputs, outputs, api_visibility="private",
              show_progress="hidden", concurrency_id="chat", trigger_mode="once")
        gr.api(chat, api_name="chat", concurrency_id="chat")
        settings_tab.select(lambda: panel.model_rows(settings, engines.model_names()), None,
                            models, api_visibility="private", show_progress="hidden")
        metrics_tab.select(show_metrics, None, metrics_outputs, api_visibility="private",
                           show_progress="minimal")
        demo.load(on_load, collection, [*doc_outputs, metrics_tab], api_visibility="private",
                  concurrency_limit=None, show_progress="minimal")
    demo.queue(default_concurrency_limit=CONCURRENCY, max_size=64)
    demo.specrag_sample = kb  # tests and scripts wait on it: demo.specrag_sample.wait()
    demo.specrag_engines = engines
    return demo
