"""Every answer names the documents it came from (``Answer.sources``), everywhere it is shown.

The real engine over the fakes of ``tests.support.fakes`` (four one-sentence chunks
``c0``..``c3`` of ``doc0.md``..``doc3.md``, pages 1-4; the word-overlap scorer as the
verifier): a source is the page of a chunk the shown answer's verdict found a sentence
supported by, or that an ``[n]`` cites. The CLI's renderer, the app's chat card, the
OpenAI endpoint (the real ``openai`` client against uvicorn on loopback) and ``/chat``
(``gradio_client`` against the launched app) all show it from the one ``Answer``.
"""

import asyncio

import openai
import pytest

from specrag.api import create_app
from specrag.cli.ask import _render
from specrag.pipeline.events import NO_SOURCE, Source
from specrag.pipeline.service import Service
from specrag.ui.chat import render_turn
from specrag.ui.turn import Turn
from tests.support.fakes import engine, launch
from tests.support.limits import serve
from tests.support.servers import ListedRetriever

# chunk c2 (doc2.md, page 3) says the first sentence; nothing says the second
LAPTOPS = "Laptops use full-disk encryption. Staff get a zeppelin voucher."
BAD = "Staff get a zeppelin voucher and quadruple wages."
# the heavy answer, from the reranked chunks c3, c2, c1, c0: supported by c1 then c2
HEAVY = "Expense claims must be filed within 30 days. Laptops use full-disk encryption."
HEAVY_K = {"retrieval.heavy_k": 4, "retrieval.rerank_fusion": False}


def ask(eng, question="Are laptops encrypted?", **kw):
    return asyncio.run(eng.aask(question, **kw))


def final_card(turn: Turn) -> str:
    """The card that is the answer (its verdict and the facts beside it)."""
    return render_turn(turn).split(" sr-final")[1].split("</section>")[0]


def turn_of(eng, question="Are laptops encrypted?", **kw) -> Turn:
    turn = Turn(question)

    async def go():
        async for ev in eng.astream(question, **kw):
            turn.apply(ev)

    asyncio.run(go())
    return turn


def test_a_draft_lists_the_page_its_verdict_found_support_in_without_any_citation(tmp_path):
    eng, _, _ = engine(tmp_path, LAPTOPS)
    a = ask(eng, policy="draft-only")
    assert a.tier == "draft" and a.citations == ()  # no [n]: the model cited nothing
    # the supported sentence's chunk, and not the chunk behind the unsupported one
    assert a.sources == (Source("doc2.md", 3, "c2", "d2", sentences=1, cited=False),)
    assert a.sourced and a.sources_line == "Sources: doc2.md p. 3"
    d = a.to_dict()
    assert d["sourced"] is True
    assert d["sources"] == [{"source": "doc2.md", "page": 3, "chunk_id": "c2", "doc_id": "d2",
                             "sentences": 1, "cited": False}]


def test_a_cited_chunk_that_also_supports_is_listed_once(tmp_path):
    eng, _, _ = engine(tmp_path, "Employees receive 25 days of paid annual leave per year [1].")
    a = ask(eng, "How much annual leave?")
    assert a.accepted
    assert a.sources == (Source("doc0.md", 1, "c0", "d0", sentences=1, cited=True),)


def test_a_heavy_answer_lists_its_own_verdicts_supports(tmp_path):
    eng, _, _ = engine(tmp_path, BAD, heavy_reply=HEAVY, **HEAVY_K)
    a = ask(eng, policy="lazy")
    assert a.tier == "heavy" and [c.id for c in a.heavy.chunks] == ["c3", "c2", "c1", "c0"]
    # best_chunk indexes the heavy prompt's chunks, not the draft's verification chunks
    assert [(s.source, s.page, s.sentences) for s in a.sources] == [("doc1.md", 2, 1),
                                                                     ("doc2.md", 3, 1)]
    assert a.sources_line == "Sources: doc1.md p. 2, doc2.md p. 3"


def test_an_answer_without_support_says_so_and_keeps_what_it_cited(tmp_path):
    eng, _, _ = engine(tmp_path, BAD)
    a = ask(eng, policy="draft-only")
    assert a.sources == () and not a.sourced and a.to_dict()["sourced"] is False
    assert a.sources_line == NO_SOURCE
    eng, _, _ = engine(tmp_path, BAD, heavy_reply="Staff get a zeppelin voucher [1].", **HEAVY_K)
    a = ask(eng, policy="lazy")
    assert a.tier == "heavy" and not a.sourced
    assert a.sources == (Source("doc3.md", 4, "c3", "d3", sentences=0, cited=True),)
    assert a.sources_line == f"{NO_SOURCE} Cited: doc3.md p. 4"


def test_a_heavy_answer_nothing_checked_lists_its_citations_as_unchecked(tmp_path):
    eng, _, _ = engine(tmp_path, BAD, heavy_reply="Pages are acknowledged fast [1].",
                       **{**HEAVY_K, "verify.check_heavy": False})
    a = ask(eng, policy="lazy")
    assert a.heavy_verdict is None and not a.sourced
    assert a.sources_line == "Cited, not checked against the documents: doc3.md p. 4"


def test_the_cli_prints_the_sources_line(tmp_path, capsys):
    eng, _, _ = engine(tmp_path, LAPTOPS)
    asyncio.run(_render(eng, "Are laptops encrypted?", "draft-only", None))
    assert "\nSources: doc2.md p. 3\n" in capsys.readouterr().out
    eng, _, _ = engine(tmp_path, BAD)
    asyncio.run(_render(eng, "Are laptops encrypted?", "draft-only", None))
    assert f"\n{NO_SOURCE}\n" in capsys.readouterr().out


def test_the_chat_shows_the_sources_and_the_search_beside_the_answers_verdict(tmp_path):
    history = [{"role": "user", "content": "Are laptops encrypted?"},
               {"role": "assistant", "content": "Laptops use full-disk encryption."}]
    eng, _, _ = engine(tmp_path, LAPTOPS)
    turn = turn_of(eng, "And what about them?", policy="draft-only", history=history)
    card = final_card(turn)
    assert 'class="sr-verdict"' in card  # the same card, after the verdict line
    assert card.index('class="sr-verdict"') < card.index("searched for: <q>")
    assert f"searched for: <q>{turn.answer.searched_for}</q>" in card
    assert 'data-sourced="true"' in card and "Sources: " in card and "doc2.md p. 3" in card
    assert 'data-chunk="c2"' in card  # each source opens in the viewer


def test_the_chat_puts_a_heavy_answers_sources_on_its_card_or_says_there_are_none(tmp_path):
    eng, _, _ = engine(tmp_path, BAD, heavy_reply=HEAVY, **HEAVY_K)
    turn = turn_of(eng, policy="lazy")
    html = render_turn(turn)
    draft_card, heavy_card = html.split('<div class="sr-link"')
    assert "sr-sources" not in draft_card
    assert "supported by the documents" in heavy_card
    assert "doc1.md p. 2" in heavy_card and "doc2.md p. 3" in heavy_card
    eng, _, _ = engine(tmp_path, BAD)
    card = final_card(turn_of(eng, policy="draft-only"))
    assert 'data-sourced="false"' in card and NO_SOURCE in card


@pytest.fixture
def endpoint(tmp_path):
    eng, _, _ = engine(tmp_path, LAPTOPS, heavy_reply=HEAVY, **HEAVY_K)
    eng = eng.replace(retriever=ListedRetriever())
    url, server = serve(create_app(eng.settings, Service(eng.settings, eng)))
    yield openai.OpenAI(base_url=url, api_key="unused-on-loopback", max_retries=0, timeout=60)
    server.should_exit = True


def test_the_openai_endpoint_carries_the_sources_plain_and_streamed(endpoint):
    messages = [{"role": "user", "content": "Are laptops encrypted?"}]
    done = endpoint.chat.completions.create(model="specrag", messages=messages,
                                            extra_body={"specrag_policy": "draft-only"})
    assert done.specrag["sourced"] is True
    assert [(s["source"], s["page"]) for s in done.specrag["sources"]] == [("doc2.md", 3)]
    last = None
    for chunk in endpoint.chat.completions.create(model="specrag", messages=messages,
                                                  stream=True,
                                                  extra_body={"specrag_policy": "draft-only"}):
        last = getattr(chunk, "specrag", None) or last
    assert last["sourced"] is True and last["sources"] == done.specrag["sources"]


@pytest.mark.slow
def test_the_gradio_chat_api_returns_the_sources(tmp_path):
    from gradio_client import Client  # the app's client: only this test needs it

    from specrag.ui.app import build

    eng, _, _ = engine(tmp_path, LAPTOPS)
    demo = build(eng.settings, engine=eng, sample=False)
    try:
        r = Client(launch(demo), verbose=False).predict(
            "Are laptops encrypted?", eng.settings.store.collection, "draft-only",
            api_name="/chat")
    finally:
        demo.close()
    assert r["sourced"] is True and r["sources"][0]["source"] == "doc2.md"
    assert r["sources"][0]["page"] == 3 and r["sources"][0]["sentences"] == 1
