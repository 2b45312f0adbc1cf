"""``specrag tune``: questions from the documents, per-collection settings, the report.

The control flow runs on fakes (``tests.support.fakes``): a question writer whose
questions come from each passage's own words, the scripted draft and heavy tiers, the
word scorer. The slow test runs it over the real store and embedder with the sample
handbook.
"""

from __future__ import annotations

import json
import re

import pytest

from specrag.pipeline import profile
from specrag.pipeline.prompts import NOT_FOUND
from specrag.security import users as users_mod
from specrag.security.users import Principal, add_user
from specrag.tune.questions import TuneQuestion, accept, held_out, parse
from specrag.tune.run import check_steps, tune
from specrag.types import Chunk, SpecragError
from tests.support.env import make_settings
from tests.support.fakes import ScriptedGenerator, engine, handbook_engine

# the fakes' drafts have no weights to distil: distillation has its own tests (test_distill)
FITS = ["calibrate", "router"]
CHUNK = Chunk(id="c1", doc_id="d1", source="leave.md", text="Employees receive 25 days of paid "
              "annual leave per calendar year. Unused days expire at the end of March.",
              index=0, start=0, end=10, content_hash="h", version="v1")


def test_replies_become_questions_and_bad_ones_are_dropped_with_a_reason():
    kept = []
    ok = accept("fact", "Q: How many days of paid leave do employees get?\nA: 25 days.",
                [CHUNK], kept)
    assert isinstance(ok, TuneQuestion) and ok.answer == "25 days" and ok.source == "leave.md"
    kept.append(ok)
    assert accept("fact", "Q: How many days of paid leave do employees receive?\nA: 25",
                  [CHUNK], kept) == "duplicate"
    assert accept("fact", "Q: Do employees receive 25 days of leave?\nA: 25 days", [CHUNK],
                  []) == "leaks its answer"
    assert accept("fact", "Q: Employees receive 25 days of paid annual leave per calendar "
                  "year?\nA: yes", [CHUNK], []) == "copies a passage sentence"
    assert accept("fact", "The passage is about leave.", [CHUNK], []) == "unparsed"
    assert accept("fact", "Q: Leave?\nA: 25", [CHUNK], []) == "not a question"
    assert parse("none", "Q: Who approves sabbaticals for contractors?") == (
        "Who approves sabbaticals for contractors?", NOT_FOUND)


def test_held_out_split_is_by_source_chunk_and_stable():
    qs = [TuneQuestion(f"q{i}", "fact", "?", "a", (f"chunk-{i // 2}",), "s") for i in range(300)]
    held = [held_out(q) for q in qs]
    assert held == [held_out(q) for q in qs]
    assert all(held[i] == held[i + 1] for i in range(0, 300, 2))  # same chunk, same side
    assert 0.2 < sum(held) / len(held) < 0.45


def test_unknown_steps_are_refused():
    assert check_steps(["calibrate"]) == ["calibrate"]
    assert check_steps(["distill", " router"]) == ["distill", "router"]
    assert check_steps([""]) == ["calibrate", "router", "distill"]
    with pytest.raises(SpecragError, match="unknown tune step 'speed'"):
        check_steps(["speed"])


def test_a_tuned_collection_answers_under_its_own_settings(tmp_path):
    eng, draft, heavy = engine(tmp_path, "Employees receive 25 days of paid annual leave per year [1].")
    s = eng.settings
    assert eng.ask("How much annual leave?", collection="hr").tier == "draft"
    profile.write(s, "hr", {"generation.policy": "heavy-only"}, ["router"])
    assert eng.ask("How much annual leave?", collection="hr").tier == "heavy"
    assert eng.ask("How much annual leave?", collection="it").tier == "draft"  # untuned
    assert profile.view(eng, "hr") is profile.view(eng, "hr")  # cached until the file changes
    assert eng.ask("How much annual leave?", collection="hr", policy="draft-only").tier == "draft"
    assert profile.settings_for(s, "hr").generation.policy == "heavy-only"
    bad = profile.path(s, "it")
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps({"settings": {"retrieval.top_k": 3}}))
    with pytest.raises(SpecragError, match="cannot be tuned per collection"):
        eng.ask("How much annual leave?", collection="it")


def test_config_show_names_the_tuned_values(tmp_path, capsys):
    from specrag.cli.main import main

    s = make_settings(tmp_path)
    profile.write(s, "hr", {"verify.answer_threshold": 0.42}, ["calibrate"])
    assert main(["--data-dir", str(tmp_path), "config", "show", "--collection", "hr"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.startswith("verify.answer_threshold"))
    assert "0.42" in line and "tune:" in line


def test_a_moved_data_dir_keeps_its_tuned_files(tmp_path):
    import shutil

    s = make_settings(tmp_path / "old")
    folder = profile.folder(s, "hr")
    folder.mkdir(parents=True)
    (folder / "draft.gguf").write_bytes(b"GGUF")
    (folder / "router.json").write_text("{}")
    mine = tmp_path / "my-draft.gguf"  # a model outside the folder keeps its own path
    profile.write(s, "hr", {"models.draft": str(folder / "draft.gguf"),
                            "routing.model": str(folder / "router.json")}, ["distill"])
    profile.write(s, "it", {"models.draft": str(mine)}, ["distill"])
    record = json.loads(profile.path(s, "hr").read_text())
    assert record["settings"]["models.draft"] == "draft.gguf"
    shutil.move(tmp_path / "old", tmp_path / "new")
    moved = make_settings(tmp_path / "new")
    tuned = profile.settings_for(moved, "hr")
    assert tuned.models.draft == str(tmp_path / "new" / "tuning" / "hr" / "draft.gguf")
    assert tuned.routing.model == str(tmp_path / "new" / "tuning" / "hr" / "router.json")
    assert profile.overrides(moved, "it")["models.draft"] == str(mine)


def test_a_one_chunk_document_is_paired_with_its_nearest_other_document(settings, embedder,
                                                                         tmp_path):
    from specrag.ingest.ingestor import Ingestor
    from specrag.retrieval.retriever import Retriever
    from specrag.tune.questions import partner, sample

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "office.txt").write_text("The Lisbon office opened in 2019; Marta Silva leads it.\n")
    (docs / "people.txt").write_text("Marta Silva came to the company from a Lisbon bank, "
                                     "where she had been treasurer.\n")
    (docs / "food.txt").write_text("The cafeteria serves vegetarian lunches on Tuesdays.\n")
    ingestor = Ingestor(settings, embedder=embedder)
    assert not ingestor.ingest([docs], "p").failed
    retriever = Retriever(settings, embedder=ingestor.embedder, store=ingestor.store)
    office = next(c for c in sample(ingestor.store, "p", 3) if c[0].source == "office.txt")
    assert len(office) == 1  # no neighbour inside its own document
    other = partner(retriever, "p", office[0])
    assert other is not None and other.source == "people.txt"


class QuestionWriter(ScriptedGenerator):
    """Writes a question from each passage's own words; answers like the handbook's heavy."""

    def reply_for(self, messages) -> str:
        text = messages[-1]["content"]
        if not text.startswith("Write one question"):
            return super().reply_for(messages)
        words = re.findall(r"[A-Za-z]{4,}", text.split("Passage 1:", 1)[1])
        if "does not answer" in text.split("\n")[0]:
            return f"Q: Which budget covers {words[0]} travel to Mars?"
        return f"Q: What does the handbook say about {words[0]} {words[1]}?\nA: {words[3]}"


@pytest.fixture(autouse=True)
def fast_bcrypt(monkeypatch):
    monkeypatch.setattr(users_mod, "BCRYPT_ROUNDS", 4)


def test_tune_writes_questions_answers_and_a_report_and_resumes(settings, embedder, tmp_path):
    from specrag.ingest.ingestor import Ingestor
    from specrag.ui.sample import SAMPLE_DIR

    Ingestor(settings, embedder=embedder).ingest([str(SAMPLE_DIR)], "hb")
    eng = handbook_engine(settings, embedder, draft_delay=0, heavy_delay=0)
    eng.heavy = QuestionWriter("claude-sonnet-4-6", [], "The documents do not say.",
                               name="anthropic")
    report = tune(settings, "hb", questions=8, engine=eng, progress=False, steps=FITS)
    folder = profile.folder(settings, "hb")
    qs = [json.loads(x) for x in (folder / "questions.jsonl").read_text().splitlines()]
    assert len(qs) == 8 and {q["kind"] for q in qs} >= {"fact", "none"}
    rows = [json.loads(x) for x in (folder / "rows.jsonl").read_text().splitlines()]
    assert sorted(r["policy"] for r in rows) == sorted(["draft-only", "heavy-only"] * 8)
    for name in ("before", "heavy_only"):
        assert set(report[name]) >= {"acceptance_rate", "accepted_precision", "correct",
                                     "total_p50_ms", "heavy_tokens"}
    assert report["heavy_only"]["acceptance_rate"] in (0, None)
    assert report["questions"]["train"] + report["questions"]["held_out"] == 8
    assert report["cost_usd"] > 0  # the fake heavy tier is priced like Claude
    assert "router" in report and "calibrate" in report
    assert (folder / "report.html").read_text().count("plotly") > 0
    assert "| before |" in (folder / "report.md").read_text()
    # resumed: nothing is asked again
    calls = len(eng.heavy.calls) + len(eng.draft.calls)
    again = tune(settings, "hb", questions=8, engine=eng, progress=False, steps=FITS)
    assert len(eng.heavy.calls) + len(eng.draft.calls) == calls
    assert again["before"] == report["before"]


def test_only_admins_may_tune(tmp_path):
    users = tmp_path / "users.yaml"
    add_user(users, "ann", "admin", "ann-pw-12345")
    add_user(users, "ed", "editor", "ed-pw-123456")
    s = make_settings(tmp_path / "data", **{"security.users_file": str(users)})
    from specrag.security.access import PermissionDenied

    with pytest.raises(PermissionDenied, match="may not administer"):
        tune(s, "hr", questions=2, engine=object(), principal=Principal("ed", "editor"),
             progress=False)


def test_encrypted_tune_files_are_not_plaintext(settings, tmp_path, monkeypatch):
    from specrag.security.crypto import DataFiles, generate_key
    from specrag.tune.collect import load_jsonl, save_jsonl

    monkeypatch.setenv("SPECRAG_ENCRYPTION_KEY", generate_key())
    files = DataFiles(settings.with_values(**{"security.encrypt": True}))
    path = tmp_path / "rows.jsonl"
    save_jsonl(files, path, [{"question": "What is DRAFT_SECRET?"}])
    assert b"DRAFT_SECRET" not in path.read_bytes()
    assert load_jsonl(files, path) == [{"question": "What is DRAFT_SECRET?"}]


def _rows(n=60):
    """Draft-only/heavy-only rows: even questions get a right draft the served verdict
    rejected (too strict a bar), odd ones a wrong draft; the heavy answer is always right."""
    qs, rows = [], []
    for i in range(n):
        gold = f"{10 + i} days"
        passage = f"Policy {i}: staff receive {gold} of leave in region {i}."
        draft = (f"Staff receive {gold} of leave in region {i} [1]." if i % 2 == 0 else
                 "Contractors are paid weekly by bank transfer [1].")
        q = TuneQuestion(f"q{i}", "fact", f"How much leave in region {i}?", gold, (f"c{i}",), "p.md")
        qs.append(q)
        base = {"id": q.id, "question": q.question, "answers": [gold], "gold_retrieved": True,
                "verify_chunks": [passage], "route_features": {"top1": 0.5 + (i % 2) * 0.01}}
        rows.append({**base, "policy": "draft-only", "draft": draft, "prediction": draft,
                     "accepted": False, "abstained": False, "heavy_tokens_in": 0,
                     "heavy_tokens_out": 0, "timings_ms": {"total": 1000}})
        rows.append({**base, "policy": "heavy-only", "draft": None, "prediction": f"It is {gold} [1].",
                     "heavy_tokens_in": 500, "heavy_tokens_out": 20,
                     "timings_ms": {"total": 8000, "heavy": 7000, "rerank": 50}})
    return qs, rows


def test_calibration_is_fitted_on_train_and_replayed_on_held_out(tmp_path):
    from specrag.grounding.verifier import Verifier
    from specrag.testing.stand_ins import WordScorer
    from specrag.tune import fit as fitting

    qs, rows = _rows()
    s = make_settings(tmp_path)
    report = fitting.fit(rows, qs, Verifier(s, scorer=WordScorer()).warm_up(), ["calibrate"],
                         target=0.9)
    before, cal = report["before"], report["calibrate"]
    assert before["acceptance_rate"] == 0 and before["correct"] == 1.0
    assert cal["acceptance_rate"] > 0.3 and cal["accepted_precision"] >= 0.9
    assert cal["total_p50_ms"] < before["total_p50_ms"] and cal["heavy_tokens"] < before["heavy_tokens"]
    assert fitting.better(cal, before) == (cal["correct"] >= before["correct"])
    assert report["questions"]["held_out"] == sum(held_out(q) for q in qs)
    assert not fitting.better({**cal, "correct": before["correct"] - 0.1}, before)


def test_the_app_tunes_in_the_background_and_shows_the_report(settings, embedder):
    from specrag.ingest.ingestor import Ingestor
    from specrag.ui.sample import SAMPLE_DIR
    from specrag.ui.session import Engines
    from specrag.ui.tuning import Tuner

    Ingestor(settings, embedder=embedder).ingest([str(SAMPLE_DIR)], "hb")
    eng = handbook_engine(settings, embedder, draft_delay=0, heavy_delay=0)
    eng.heavy = QuestionWriter("claude-sonnet-4-6", [], "The documents do not say.",
                               name="anthropic")
    tuner = Tuner(settings, Engines(settings, eng), questions=40, steps=FITS)
    assert "has not been tuned yet" in tuner.status("hb")
    with pytest.raises(SpecragError, match="unknown tune step 'fast'"):
        tuner.start("hb", steps=["fast"])
    with pytest.raises(SpecragError, match="at least 4 questions"):
        tuner.start("hb", questions=2)
    with pytest.raises(SpecragError, match="0 or more"):
        tuner.start("hb", max_cost_usd=-1)
    with pytest.raises(SpecragError, match="0 or more"):
        tuner.start("hb", max_cost_usd=float("nan"))
    with pytest.raises(SpecragError, match="whole number of at least 4"):
        tuner.start("hb", questions=0)
    first = tuner.start("hb", questions=6, max_cost_usd=5.0, steps=["calibrate"])
    assert "Tuning **hb**" in first or "# Tune of collection" in first
    tuner.wait("hb", 120)
    assert tuner.status("hb").startswith("# Tune of collection `hb`")
    got = json.loads((profile.folder(settings, "hb") / "report.json").read_text())
    assert got["steps"] == ["calibrate"] and got["budget"]["max_cost_usd"] == 5.0
    assert got["budget"]["asked"] == 6
    assert eng.tuned_for is None  # the app's engine itself is not changed
    # the Metrics tab lists the report and serves a copy of its plotly page
    from specrag.ui.tuning import reports

    text, pages = reports(settings)
    assert text.startswith("# Tune of collection `hb`") and len(pages) == 1
    assert "plotly" in open(pages[0], encoding="utf-8").read()


def test_tune_reports_show_only_collections_the_user_may_read(tmp_path):
    import yaml

    from specrag.tune.report import write
    from specrag.ui.tuning import reports

    users = tmp_path / "users.yaml"
    add_user(users, "ana", "viewer", "ana-pw-123456")
    data = yaml.safe_load(users.read_text())
    data["collections"] = {"hr": {"read": ["ana"], "write": []}}  # legal: admins only
    users.write_text(yaml.safe_dump(data))
    s = make_settings(tmp_path / "data", **{"security.users_file": str(users)})
    block = {"acceptance_rate": 0.5, "accepted_precision": 1.0, "correct": 0.75,
             "total_p50_ms": 900.0, "heavy_tokens": 100}
    for name in ("hr", "legal"):
        folder = profile.folder(s, name)
        folder.mkdir(parents=True)
        write({"collection": name, "questions": {"train": 4, "held_out": 2}, "heavy": "h",
               "draft": "d", "cost_usd": 0.0, "before": block, "after": block,
               "settings_written": {}, "seconds": {"fit": 0.1}}, folder)
    text, pages = reports(s, Principal("ana", "viewer"))
    assert "`hr`" in text and "legal" not in text and len(pages) == 1


def test_the_app_refuses_a_tune_by_an_editor(tmp_path):
    from specrag.security.access import PermissionDenied
    from specrag.ui.tuning import Tuner

    users = tmp_path / "users.yaml"
    add_user(users, "ed", "editor", "ed-pw-123456")
    s = make_settings(tmp_path / "data", **{"security.users_file": str(users)})
    with pytest.raises(PermissionDenied):
        Tuner(s, engines=None).start("hr", Principal("ed", "editor"))


def test_claude_as_teacher_gets_redacted_prompts_and_its_cost_is_counted(settings, embedder,
                                                                          monkeypatch):
    """The real Anthropic SDK against the local Messages-API server writes the questions
    and the references; no e-mail address of the handbook reaches it."""
    from specrag.generators.anthropic_backend import AnthropicGenerator
    from specrag.ingest.ingestor import Ingestor
    from specrag.testing.mockapi import MockAPI, first_sentence_answer
    from specrag.ui.sample import SAMPLE_DIR

    writer = QuestionWriter("x", [], "")

    def respond(messages):
        text = messages[-1]["content"]
        return (writer.reply_for([{"content": text}]) if text.startswith("Write one question")
                else first_sentence_answer(messages))

    Ingestor(settings, embedder=embedder).ingest([str(SAMPLE_DIR)], "hb")
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-test-123")
    with MockAPI(responder=respond) as api:
        eng = handbook_engine(settings, embedder, draft_delay=0, heavy_delay=0)
        eng.heavy = AnthropicGenerator("claude-sonnet-4-6", api_key_env="TEST_ANTHROPIC_KEY",
                                       base_url=api.url, timeout_s=10)
        report = tune(settings, "hb", questions=10, engine=eng, progress=False, steps=FITS,
                      max_cost_usd=100.0)
        bodies = [json.dumps(r["body"]) for r in api.requests]
        # a cap the first question's writing spends: no more is written, none answered
        calls = len(api.requests)
        poor = settings.with_values(**{"data_dir": str(settings.data_path / "poor")})
        Ingestor(poor, embedder=embedder).ingest([str(SAMPLE_DIR)], "hb")
        eng2 = handbook_engine(poor, embedder, draft_delay=0, heavy_delay=0)
        eng2.heavy = eng.heavy
        with pytest.raises(SpecragError, match=r"budget of \$0\.00 was spent"):
            tune(poor, "hb", questions=10, engine=eng2, progress=False, steps=FITS,
                 max_cost_usd=1e-9)
        assert len(api.requests) - calls == 1
    assert sum("Write one question" in b for b in bodies) >= 10
    assert report["cost_usd"] > 0 and report["heavy_only"]["heavy_tokens"] > 0
    assert report["budget"] == {"max_cost_usd": 100.0, "reached": False, "answered": 10,
                                "asked": 10}
    assert "of a $100.00 cap." in (profile.folder(settings, "hb") / "report.md").read_text()
    assert not any(re.search(r"[a-z]+@northwind\.example", b) for b in bodies)
    assert any("<EMAIL_" in b for b in bodies)  # the passages held some: they were swapped


def test_the_tune_buttons_receive_the_request_so_the_signed_in_user_is_checked():
    """Gradio passes ``gr.Request`` only to a parameter it can read as that type (a
    postponed string annotation is not read: the handler then gets one argument)."""
    import inspect

    import gradio as gr

    from specrag.ui import tuning

    with gr.Blocks() as demo:
        tuning.build_section(tuning.Tuner(None, None), gr.Textbox(), gr, lambda r: None)
    handlers = {f.name: f.fn for f in demo.fns.values()}
    for name in ("start", "show"):
        params = inspect.signature(handlers[name]).parameters
        assert params["request"].annotation is gr.Request
    # the admin sets the budget and the steps: the button sends them
    start = next(f for f in demo.fns.values() if f.name == "start")
    labels = [getattr(c, "label", None) for c in start.inputs]
    assert labels[1:] == ["Questions", "Cost cap (USD, blank: none)", "Steps"]



def test_a_cost_cap_of_zero_allows_free_models_only():
    from specrag.tune.collect import over_budget

    assert not over_budget(0.0, 0.0) and over_budget(0.0001, 0.0)  # local: free; Claude: not
    assert not over_budget(0.5, 1.0) and over_budget(1.0, 1.0) and not over_budget(9.0, None)
