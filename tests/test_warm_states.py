"""Warming a collection's draft prompts: the real 0.5B draft in its server answers a first
question about a warmed chunk from the state a new process restored from its slot file,
the same text as cold; the warmer's control flow
(which chunks, when, when not) with stand-in parts; the service asks for it after a
question."""

import asyncio
import threading
from types import SimpleNamespace

import pytest

from specrag import sources
from specrag.generators.base import collect
from specrag.pipeline.prompts import build_messages
from specrag.pipeline.warm_states import StateWarmer
from specrag.types import Chunk
from tests.support.env import make_settings


LEAVE = ("Annual leave. Every employee receives 25 days of paid annual leave per calendar "
         "year. Up to five unused days may be carried over to the next year, and must be "
         "taken by the end of March. Requests go to your manager at least two weeks ahead.")
EXPENSES = ("Expenses. Claims are filed in the finance portal within 30 days with receipts. "
            "Any single claim above EUR 500 needs the approval of the Finance Director. "
            "Travel is booked through the company's travel desk, economy class by default.")


def chunk(i: int, text: str) -> Chunk:
    return Chunk(f"c{i}", f"d{i}", f"doc{i}.md", text, 0, 0, len(text), "h", "v")


# -- the real model ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    pytest.importorskip("xllamacpp", reason="xllamacpp is in requirements.txt")
    return sources.resolve("draft", make_settings(tmp_path_factory.mktemp("warm")))


def _server(model_path, states, **kw):
    from specrag.generators.llama_server import LlamaServerGenerator

    # two slots and a context of their own: no other test's server, and no prompt it cached
    return LlamaServerGenerator(model_path=model_path, threads=2, parallel=2, n_ctx=2048,
                                states_dir=str(states), role="warm-test", **kw).warm_up()


@pytest.mark.slow
def test_a_warmed_chunk_survives_a_restart_in_its_slot_file(model_path, tmp_path):
    from specrag.generators.state_folders import invalidate, read_epoch

    cold = _server(model_path, tmp_path / "none", prompt_cache=False)
    warm = _server(model_path, tmp_path / "states")
    prompts = [build_messages("", [chunk(i, text)]) for i, text in enumerate((LEAVE, EXPENSES))]
    try:
        assert cold.prefill(prompts[0]) is None  # no prompt cache: nothing to keep
        for i, messages in enumerate(prompts):
            states = warm.prefill(messages)
            assert states["outcome"] == "stored" and states["evaluated"] > 30
            assert len(list(warm.files.folder.glob("*.bin"))) == i + 1
        assert warm.prefill(prompts[0])["outcome"] == "held"  # the cache has it: no new file
        assert warm.prefill(build_messages("", [chunk(2, LEAVE + " Also.")]),
                            fill=0.0)["outcome"] == "full"  # over budget: no file written
        first = warm.server.pid
        warm.server.close()  # a restart: the process and its prompt cache are gone
        for messages in prompts:
            again = warm.prefill(messages)
            assert again["outcome"] == "restored" and again["evaluated"] <= 8
        assert warm.server.pid != first
        for question, text, i in (("How many days of paid leave are there?", LEAVE, 0),
                                  ("Who must approve a large claim?", EXPENSES, 1)):
            messages = build_messages(question, [chunk(i, text)])
            got, usage = asyncio.run(collect(warm, messages, max_tokens=24))
            want, _ = asyncio.run(collect(cold, messages, max_tokens=24))
            assert got == want  # the restored cells are those the same tokens produce
            # everything up to the question came from the restored state
            assert 0.8 * usage.input_tokens - 30 < usage.state_tokens < usage.input_tokens
        # chunks left the store: the files go, and the next request meets a new process
        epoch, before = read_epoch(tmp_path / "states"), warm.server.pid
        invalidate(tmp_path / "states")
        assert not list(warm.files.folder.glob("*.bin"))
        assert warm.prefill(prompts[0], epoch=epoch)["outcome"] == "stale"
        _, usage = asyncio.run(collect(warm, build_messages("Who approves?", [chunk(1, EXPENSES)]),
                                       max_tokens=4))
        assert warm.server.pid != before and usage.state_tokens < 40  # nothing cached
    finally:
        cold.close()
        warm.close()


# -- the warmer's control flow (stand-in parts) ------------------------------------------------
class Draft:
    """Keeps prompts like ``StatefulLlama.prefill``: held ones are not evaluated again, and
    none is once the store is over ``fill``; a prompt holding ``fail`` raises ``error``."""

    def __init__(self, budget=64 * 2**20, per_prompt=2**20, fail="", error=None):
        self.prompts, self.held = [], set()
        self.budget, self.per_prompt, self.fail, self.error = budget, per_prompt, fail, error

    def prefill(self, messages, fill=1.0, epoch=None):
        prompt = messages[1]["content"]
        if self.fail and self.fail in prompt:
            raise self.error
        outcome = "held" if prompt in self.held else (
            "full" if self.per_prompt * len(self.held) >= fill * self.budget else "stored")
        if outcome == "stored":
            self.prompts.append(prompt)
            self.held.add(prompt)
        return {"outcome": outcome, "entries": len(self.held),
                "bytes": self.per_prompt * len(self.held), "budget_bytes": self.budget}


class ChunkStore:
    def __init__(self, texts):
        self.chunks = [chunk(i, t) for i, t in enumerate(texts)]

    def visible_chunks(self, collection, limit=None):
        return self.chunks[:limit]


def engine(tmp_path, texts, draft=None, **values):
    return SimpleNamespace(settings=make_settings(tmp_path, **values), draft=draft or Draft(),
                           retriever=SimpleNamespace(store=ChunkStore(texts)))


def test_each_visible_chunk_is_prefilled_with_the_draft_prompt_up_to_its_question(tmp_path):
    e = engine(tmp_path, [LEAVE, EXPENSES])
    warmer = StateWarmer(e, max_chunks=8)
    report = warmer.warm("handbook")
    assert report == {"chunks": 2, "warmed": 2, "restored": 0, "total": 2, "skipped": "",
                      "seconds": report["seconds"], "state_mb": 2.0}
    # the prompt a question about that chunk will have, up to the question
    want = build_messages("", [chunk(0, LEAVE)])[1]["content"]
    assert e.draft.prompts[0] == want and "25 days" in want
    asked = build_messages("How long?", [chunk(0, LEAVE)])[1]["content"]
    assert asked.startswith(want[:want.index("Question:") + len("Question:")])
    # asked again: every prompt is held; a new chunk is the only one evaluated
    again = warmer.warm("handbook")
    assert again["warmed"] == 0 and again["total"] == 2 and again["state_mb"] == 2.0
    e.retriever.store.chunks.append(Chunk("c9", "d9", "new.md", "New text.", 0, 0, 9, "h", "v"))
    report = warmer.warm("handbook")
    assert report["warmed"] == 1 and report["total"] == 3 and "New text." in e.draft.prompts[-1]
    assert len(e.draft.prompts) == 3


@pytest.mark.parametrize("values, why", [
    ({"retrieval.draft_k": 3}, "several chunks"),
    ({"retrieval.draft_words": 60}, "cut to each question"),
    ({"generation.prompt_cache": False}, "prompt cache is off"),
    ({"generation.warm_states": 0}, "warm_states is 0"),
    ({"generation.policy": "heavy-only"}, "no drafts"),
    ({"security.redact": True, "security.redact_local": True}, "redacted prompts"),
])
def test_warming_is_skipped_with_a_reason_where_no_warm_state_would_be_used(tmp_path, values, why):
    e = engine(tmp_path, [LEAVE], **values)
    report = StateWarmer.from_settings(e.settings, e).warm("handbook")
    assert why in report["skipped"] and report["warmed"] == 0 and e.draft.prompts == []


def test_a_large_collection_or_a_full_store_stops_the_warming(tmp_path):
    e = engine(tmp_path, [f"Text {i}." for i in range(10)])
    report = StateWarmer(e, max_chunks=9).warm("c")
    assert "more than generation.warm_states (9)" in report["skipped"] and e.draft.prompts == []
    # 1 MB a prompt in a 4 MB store: at three-quarters full the model takes no more
    e.draft = Draft(budget=4 * 2**20)
    report = StateWarmer(e, max_chunks=64).warm("c")
    assert report["warmed"] == 3 and "75% full" in report["skipped"]
    # a draft model without prompt states: nothing is prefilled
    e.draft = SimpleNamespace(prefill=lambda messages, fill, epoch=None: None)
    assert "keeps no prompt states" in StateWarmer(e, max_chunks=64).warm("d")["skipped"]


def test_the_warming_carries_the_states_epoch_and_stops_once_chunks_left_the_store(tmp_path):
    from specrag.generators.state_folders import invalidate, read_epoch, root_for

    e = engine(tmp_path, [LEAVE, EXPENSES, "Text 2."])
    root = root_for(e.settings.data_path)
    invalidate(root)
    listed, seen = read_epoch(root), []

    class DeletedMeanwhile(Draft):  # the model saw a newer epoch from the second prompt on
        def prefill(self, messages, fill=1.0, epoch=None):
            seen.append(epoch)
            if len(seen) > 1:
                return {"outcome": "stale", "entries": 1, "bytes": 2**20, "budget_bytes": 2**26}
            return super().prefill(messages, fill)

    e.draft = DeletedMeanwhile()
    report = StateWarmer(e, max_chunks=8).warm("c")
    assert seen == [listed, listed] and report["total"] == 1
    assert "left the store" in report["skipped"] and len(e.draft.prompts) == 1


def test_a_failing_chunk_is_passed_over_and_repeated_failures_end_the_warming(tmp_path):
    from specrag.generators.base import GenerationError

    texts = ["Text 0.", "Text 1 is too long.", "Text 2."]
    e = engine(tmp_path, texts, Draft(fail="too long", error=GenerationError("n_ctx exceeded")))
    report = StateWarmer(e, max_chunks=8).warm("c")
    assert report["warmed"] == 2 and report["skipped"] == ""  # the others still warmed
    e = engine(tmp_path, [f"Text {i}." for i in range(6)],
               Draft(fail="Text", error=GenerationError("the model server ended")))
    report = StateWarmer(e, max_chunks=8).warm("c")
    assert report["warmed"] == 0 and "3 chunks failed" in report["skipped"]


def test_a_skip_reason_is_logged_once_not_after_every_question(tmp_path, caplog):
    e = engine(tmp_path, [LEAVE], **{"retrieval.draft_k": 3})
    warmer = StateWarmer.from_settings(e.settings, e)
    with caplog.at_level("INFO", logger="specrag.pipeline.warm_states"):
        for _ in range(3):
            warmer.warm("handbook")
    said = [r for r in caplog.records if r.levelname == "INFO"]
    assert len(said) == 1 and "several chunks" in said[0].getMessage()


def test_questions_go_first_and_close_stops_the_background_warming(tmp_path):
    e = engine(tmp_path, [LEAVE, EXPENSES])
    busy = threading.Event()
    busy.set()
    warmer = StateWarmer(e, max_chunks=8, idle=lambda: not busy.is_set(), poll_s=0.01,
                         quiet_s=0.05)
    warmer.request("handbook")
    assert not warmer.wait(0.3) and e.draft.prompts == []  # a question is in flight
    busy.clear()
    assert warmer.wait(5) and len(e.draft.prompts) == 2
    assert warmer.report["handbook"]["warmed"] == 2
    # a failure inside a warming is logged; the thread goes on with the next request
    e.retriever.store = None
    warmer.request("broken")
    assert warmer.wait(5) and "broken" not in warmer.report
    e.retriever.store = ChunkStore([LEAVE, EXPENSES, "Third text."])
    warmer.request("handbook")
    assert warmer.wait(5) and warmer.report["handbook"]["warmed"] == 1
    warmer.close()
    assert not warmer._thread.is_alive()
    warmer.request("other")  # after close: refused, nothing starts
    assert "other" not in warmer.report and warmer.wait(0)


def prefilling_service(tmp_path):
    """A ``Service`` over the real engine with stand-in parts whose draft keeps prompts."""
    from specrag.grounding.verifier import Verifier
    from specrag.pipeline.engine import SpeculativeRAG
    from specrag.pipeline.service import Service
    from tests.support.fakes import FakeRetriever, ReverseReranker, WordScorer
    from tests.support.resilience import Scripted

    class PrefillingDraft(Scripted):
        def __init__(self):
            super().__init__("llama-cpp", "draft-model", ["A draft [1]."])
            self.states = Draft()

        def prefill(self, messages, fill=1.0, epoch=None):
            return self.states.prefill(messages, fill)

    class StoredRetriever(FakeRetriever):
        store = ChunkStore([LEAVE, EXPENSES])  # what the warmer lists

    settings = make_settings(tmp_path, **{"budget.ledger": False})
    engine = SpeculativeRAG(settings, retriever=StoredRetriever(), draft=PrefillingDraft(),
                            heavy=Scripted("anthropic", "claude-sonnet-4-6", ["Heavy [1]."]),
                            verifier=Verifier(settings, scorer=WordScorer()),
                            reranker=ReverseReranker())
    return Service(settings, engine)


def test_the_service_warms_a_collection_after_a_question_to_it(tmp_path):
    service = prefilling_service(tmp_path)
    try:
        assert service.ask("How many days of leave?", collection="handbook") is not None
        assert service.warmer.wait(5)
        assert service.warmer.report["handbook"]["warmed"] == 2
        assert any("25 days" in p for p in service.engine.draft.states.prompts)
    finally:
        service.close()


def test_opening_the_page_loads_the_models_and_warms_the_collection(tmp_path):
    from specrag.ui.session import Engines

    service = prefilling_service(tmp_path)
    engines = Engines(service.settings, service)
    try:
        assert not engines.warm
        engines.prepare("handbook").join(30)
        assert engines.warm  # the models are loaded before anyone asks
        assert service.warmer.wait(5) and service.warmer.report["handbook"]["warmed"] == 2
        engines.prepare("handbook").join(30)  # a second page: nothing loads twice
        assert service.warmer.wait(5) and service.warmer.report["handbook"]["warmed"] == 0
        assert service.warmer.report["handbook"]["total"] == 2
    finally:
        service.close()


def test_the_bench_table_shows_questions_asked_while_warming():
    from specrag.bench.warm_states import table

    def run(warm, during, warming):
        return {"warm_states": warm, "cold": True, "during": during, "warming": warming,
                "questions": 20, "draft_ttft_p50_s": 1.0, "draft_ttft_p95_s": 1.1,
                "total_p50_s": 2.0, "total_p95_s": 3.4, "rows": []}

    out = table({"off": run(0, True, {}), "same_drafts": 20, "first_token_ratio": 0.97,
                 "during": run(1024, True, {"warmed": 39, "total": 39})})
    rows = out.splitlines()
    assert rows[2].startswith("| 0 |") and rows[2].endswith("| - |")
    assert "1024, questions while warming" in rows[3]
    assert "39 prefilled meanwhile" in rows[3]
    assert "same drafts: 20 of 20; first token 0.97x" in out
