"""The Gradio app: chat with an instant draft, its verdict and the heavy fallback; documents.

``build(settings=None, engine=None, sample=True)`` assembles the tabs from the ``ui``
modules and returns the ``gr.Blocks``; ``launch_options()`` gives what ``launch()``
needs (stylesheet, theme). With ``engine=None`` the real ``SpeculativeRAG`` is built
lazily: its models load on the first question, so the app starts in seconds. Tests
inject an engine made of fakes. On first start the sample handbook is ingested into the
``handbook`` collection in the background if that collection is empty.

API endpoints (``gradio_client``), stable: ``/chat`` (question, collection, policy ->
``Answer.to_dict()``), ``/ingest`` (files, collection -> summary, per-file rows,
documents), ``/delete`` (document, collection -> message, documents), ``/search``
(query, collection, k -> status, hits).

Several users at once: every chat event gets its own ``ChatSession`` (``gr.State``) and
passes its session's settings with the question; the engine is shared but keeps no
per-question state between calls.

Deliberately not here: rendering (``chat``, ``charts``), tab contents (``documents``,
``search``, ``panel``), engine and pipeline logic (``specrag.engine``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

from ..ingest import Ingestor
from ..retrieval import Retriever
from ..settings import Settings
from ..store import Store
from ..types import SpecragError
from . import charts, documents, panel, search
from .chat import Turn
from .sample import COLLECTION, EASY, HARD, SampleKB
from .session import ChatSession, Engines, Options, follow

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"
# Answers mostly wait on models (local ones serialise on their own lock, remote ones
# overlap), so a few at once keeps the page responsive without oversubscribing 2 cores.
CONCURRENCY = 4
MAX_QUESTION = 2000  # characters; longer input is cut, not refused
SAMPLE_WAIT_S = 600  # a first question may wait this long for the sample ingestion

log = logging.getLogger(__name__)


def css() -> str:
    path = ASSETS / "style.css"
    return path.read_text() if path.exists() else ""


def launch_options() -> dict:
    """Keyword arguments for ``launch()``: Gradio 6 takes css and theme there."""
    import gradio as gr

    # system fonts only: the default theme would fetch web fonts, which offline hosts lack
    theme = gr.themes.Soft(primary_hue="blue", neutral_hue="slate",
                           font=["Inter", "system-ui", "Segoe UI", "sans-serif"],
                           font_mono=["ui-monospace", "SFMono-Regular", "monospace"])
    return {"css": css(), "theme": theme}


def header_html() -> str:
    logo = ASSETS / "logo.svg"
    svg = logo.read_text() if logo.exists() else "<b>specrag</b>"  # our own file, not user data
    return (f'<div class="sr-brand">{svg}<p>Speculative RAG: a small model drafts from a broad '
            "set of passages, a verifier checks every sentence, and only a rejected draft "
            "goes to the heavy model.</p></div>")


def build(settings: Settings | None = None, engine=None, sample: bool = True):
    import gradio as gr

    settings = settings or (engine.settings if engine is not None else Settings.load()[0])
    retriever = getattr(engine, "retriever", None)
    if not isinstance(retriever, Retriever):  # share one embedder and store with ingestion
        retriever = None
    store = retriever.store if retriever else Store(settings)
    ingestor = Ingestor(settings, embedder=retriever.embedder if retriever else None, store=store)
    retriever = retriever or Retriever(settings, embedder=ingestor.embedder, store=store)
    engines = Engines(settings, engine, retriever)
    write_lock = threading.Lock()
    kb = SampleKB(ingestor, write_lock)
    kb.start() if sample else kb.skip()
    default = COLLECTION if sample else settings.store.collection
    lib = documents.Library(settings, ingestor, write_lock, default=default)

    async def respond(question, collection, session, *opts):
        session = session or ChatSession()
        question = " ".join((question or "").split())[:MAX_QUESTION]
        if not question:
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        turn = Turn(question)
        if not engines.warm:
            turn.note = "loading the models (first question only)…"
        yield session.html(turn), "", gr.skip(), gr.skip(), gr.skip()
        try:
            if collection == kb.collection and not kb.ready:
                await asyncio.to_thread(kb.wait, SAMPLE_WAIT_S)
            engine = await asyncio.to_thread(engines.view, Options(*opts))
            events = engine.astream(question, policy=opts[0] or None, collection=collection)
            async for t in follow(events, turn):
                yield session.html(t), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        except SpecragError as err:
            turn.error = str(err)
        except Exception as err:  # noqa: BLE001 - shown in the turn; the session goes on
            log.exception("answering %r failed", question)
            turn.error = f"Something went wrong: {type(err).__name__}: {str(err)[:300]}"
        session.finish(turn)
        yield (session.html(), gr.skip(), session, charts.figure(session.points),
               charts.stats_markdown(session.points))

    async def chat(question: str, collection: str = default, policy: str = "") -> dict:
        """Answer a question from a collection; returns the answer as a dict (see README)."""
        question = " ".join((question or "").split())[:MAX_QUESTION]
        try:
            if collection == kb.collection:
                await asyncio.to_thread(kb.wait, SAMPLE_WAIT_S)
            engine = await asyncio.to_thread(engines.warm_up)
            answer = await engine.aask(question, policy=policy or None,
                                       collection=collection or None)
        except SpecragError as err:
            raise gr.Error(str(err)) from None
        return answer.to_dict()

    async def on_load(collection):
        await asyncio.to_thread(kb.wait, SAMPLE_WAIT_S)
        return refresh_docs(collection)

    with gr.Blocks(title="specrag · speculative RAG") as demo:
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
                                               js_on_load=None, autoscroll=True,
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
                refresh_docs, doc_outputs = documents.build_tab(lib, collection, gr)
            with gr.Tab("Search", id="search"):
                search.build_tab(retriever, collection, settings.retrieval.top_k, gr)
            with gr.Tab("Settings", id="settings") as settings_tab:
                options, models = panel.build_tab(settings, engines, gr)

        inputs = [question, collection, session, *options]
        outputs = [conversation, question, session, plot, stats]
        # one event for both triggers: a second Enter while an answer streams is ignored
        gr.on([question.submit, ask.click], respond, inputs, outputs, api_visibility="private",
              show_progress="hidden", concurrency_id="chat", trigger_mode="once")
        gr.api(chat, api_name="chat", concurrency_id="chat")
        settings_tab.select(lambda: panel.model_rows(settings, engines.model_names()), None,
                            models, api_visibility="private", show_progress="hidden")
        demo.load(on_load, collection, doc_outputs, api_visibility="private",
                  concurrency_limit=None, show_progress="minimal")
    demo.queue(default_concurrency_limit=CONCURRENCY, max_size=64)
    demo.specrag_sample = kb  # tests and scripts wait on it: demo.specrag_sample.wait()
    demo.specrag_engines = engines
    return demo
