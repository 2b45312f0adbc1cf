"""The Search tab: what retrieval returns for a query, before any model writes a word.

Useful to see why an answer was drafted from the passages it was: rank, cosine score,
source, page, heading and text of the top-k chunks. Registers the ``/search`` API
endpoint (query, collection, k) -> (status line, hits table); keep it stable. Searches
act as the request's user (``who(request)``): the retriever refuses a collection they may
not read. A refusal or a bad input (an empty, over-long or non-text query; the slider
itself refuses a ``k`` out of range) is a ``gr.Error`` with one plain line (``AppError`` in ``gradio_client``), not a
status line: a caller must not mistake it for a result.

Deliberately not here: retrieval itself (``Retriever``), answering (the Chat tab).
"""

# no ``from __future__ import annotations``: Gradio reads the ``gr.Request`` hint of the
# handler at runtime, and ``gr`` is a parameter here, not a module global
from specrag.security.sanitize import check_question
from specrag.types import SpecragError, one_line

HEADERS = ["rank", "score", "source", "page", "heading", "text"]


def search(retriever, query: str, collection: str, k, who=None) -> tuple[str, list[list]]:
    """(status line, rows); a ``SpecragError`` for anything that is not a search."""
    query = check_question(query, retriever.settings.security.max_question_chars).strip()
    if not query:
        raise SpecragError("type a question or keywords")
    if collection is not None and not isinstance(collection, str):
        raise SpecragError(f"the collection must be text, not {type(collection).__name__}")
    res = retriever.retrieve(query, top_k=int(k), collection=collection, principal=who)
    # a plain-text table (Dataframe "str" cells): document text is shown, never rendered
    rows = [[h.rank, round(h.score, 3), h.chunk.source, h.chunk.page or "",
             h.chunk.heading or "", h.chunk.text] for h in res.hits]
    return (f"{len(res.hits)} chunks in {res.total_ms:.0f} ms "
            f"(encode {res.encode_ms:.0f} ms, search {res.search_ms:.0f} ms)"), rows


def build_tab(retriever, collection, top_k: int, gr, who) -> None:
    def run(query, collection, k, request: gr.Request):  # parameter names are the API's
        try:
            return search(retriever, query, collection, k, who(request))
        except SpecragError as err:  # shown as a toast; plain text, Gradio escapes it
            raise gr.Error(one_line(err)) from None

    with gr.Row(equal_height=True):
        query = gr.Textbox(label="Query", placeholder="How many days of annual leave?",
                           scale=6, elem_id="sr-search-q")
        k = gr.Slider(1, 50, value=min(10, top_k), step=1, label="top k", scale=2)
        btn = gr.Button("Search", variant="primary", scale=1)
    status = gr.Markdown(label="status")
    hits = gr.Dataframe(headers=HEADERS, wrap=True, interactive=False, label="hits",
                        column_widths=["6%", "7%", "15%", "6%", "14%", "52%"])
    query.submit(run, [query, collection, k], [status, hits], api_name="search")
    btn.click(run, [query, collection, k], [status, hits], api_visibility="private")
