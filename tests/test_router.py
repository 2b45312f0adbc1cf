"""The query router: features, the model, the ``routed`` policy, the ledger and the replay."""

import asyncio
import json
import sqlite3

import numpy as np
import pytest

from specrag.bench.e2e_report import routed_at
from specrag.observability import ledger as ledger_mod
from specrag.observability.ledger import Ledger
from specrag.pipeline.events import KINDS
from specrag.resilience.attempts import Attempt
from specrag.routing.features import FEATURES, route_features
from specrag.routing.router import BUILTIN, Route, Router, RouterModel
from specrag.types import Chunk, Hit
from tests.support.fakes import engine


def _hits(texts, scores, sources=None):
    return tuple(Hit(Chunk(f"c{i}", f"d{i}", (sources or [f"doc{i}.md" for i in texts])[i], t, 0, 0,
                           len(t), "h", "v"), s, i + 1)
                 for i, (t, s) in enumerate(zip(texts, scores)))


def test_features_read_the_question_and_the_retrieval():
    hits = _hits(["The bridge opened in 1921 after six years of work.", "Trains run hourly.",
                  "The river is wide."], [0.8, 0.5, 0.4], ["a.md", "a.md", "b.md"])
    f = route_features("When did the bridge open?", hits)
    assert set(f) == set(FEATURES)
    assert f["top1"] == pytest.approx(0.8) and f["margin"] == pytest.approx(0.3)
    assert f["spread"] == pytest.approx(0.35) and f["sources"] == pytest.approx(2 / 5)
    assert f["asks_year"] == 1.0 and f["asks_name"] == 0.0 and f["kind_found"] == 1.0
    assert f["cover_top1"] == 1.0 and f["multi_hop"] == 0.0  # "bridge", "open" both in it
    # the asked-for kind is absent from the chunks the draft would see; a comparison
    g = route_features("Which opened first, the bridge or the tunnel?", hits[1:])
    assert g["multi_hop"] == 1.0 and g["cover_top1"] == 0.0
    assert route_features("How many trains run?", hits[2:])["kind_found"] == 0.0
    # hybrid retrieval's fused order keeps cosine scores out of order: the score features
    # read them best first, as the router learnt them on dense order
    fused = _hits(["Trains run hourly.", "The bridge opened in 1921 after six years of work.",
                   "The river is wide."], [0.5, 0.8, 0.4], ["a.md", "a.md", "b.md"])
    h = route_features("When did the bridge open?", fused)
    assert (h["top1"], h["margin"], h["spread"]) == pytest.approx((0.8, 0.3, 0.35))


def test_model_learns_the_direction_and_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    feats = []
    for _ in range(200):
        f = {k: float(rng.random()) for k in FEATURES}
        feats.append(f)
    labels = [float(f["top1"] + 0.1 * rng.standard_normal() > 0.5) for f in feats]
    m = RouterModel.fit(feats, labels, fitted_on="synthetic", threshold=0.4)
    assert m.weights[FEATURES.index("top1")] > 2 * max(abs(w) for k, w in zip(FEATURES, m.weights)
                                                       if k != "top1")
    hi, lo = dict(feats[0], top1=0.95), dict(feats[0], top1=0.05)
    assert m.predict(hi) > 0.8 > 0.2 > m.predict(lo)
    back = RouterModel.load(m.save(tmp_path / "r" / "router.json"))
    assert back == m
    raw = json.loads((tmp_path / "r" / "router.json").read_text())
    raw["features"] = raw["features"][:-1]
    (tmp_path / "bad.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="retrain"):
        RouterModel.load(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="specrag train router"):
        Router(str(tmp_path / "missing.json")).warm_up()


def test_shipped_router_loads_and_prefers_a_clear_single_passage():
    assert BUILTIN.is_file()
    r = Router()
    clear = r.route("When did the Basel bridge open?",
                    _hits(["The Basel bridge opened in 1921.", "Trains.", "Rivers."], [0.85, 0.3, 0.25]))
    vague = r.route("Which came first, the band or the magazine that both share a founder?",
                    _hits(["Trains.", "Rivers.", "Songs."], [0.31, 0.3, 0.29], ["a", "b", "c"]))
    assert clear.p_draft > vague.p_draft
    assert 0 < r.bar < 1 and clear.ms < 10  # milliseconds at most: it runs before every draft
    assert "route " in clear.label and clear.to_dict()["route"] == clear.route


def _router(tmp_path, bar: float) -> Router:
    m = RouterModel(0.0, tuple(0.0 for _ in FEATURES), "test", 0.5)  # P = 0.5 for every question
    return Router(str(m.save(tmp_path / "router.json")), threshold=bar)


def test_routed_policy_skips_the_draft_when_the_router_says_heavy(tmp_path):
    eng, draft, heavy = engine(tmp_path, "Employees receive 25 days of paid annual leave [1].")
    eng = eng.replace(router=_router(tmp_path, 0.9))
    evs = asyncio.run(_events(eng, policy="routed"))
    kinds = [e.kind for e in evs]
    assert kinds[:2] == ["retrieved", "routed"] and "draft_token" not in kinds
    assert [KINDS.index(k) for k in kinds] == sorted(KINDS.index(k) for k in kinds)
    ans = evs[-1].answer
    assert ans.tier == "heavy" and ans.policy == "routed" and draft.calls == []
    assert ans.route.route == "heavy" and ans.route.p_draft == 0.5 and "route" in ans.timings_ms
    assert ans.to_dict()["route"]["route"] == "heavy"


def test_routed_policy_drafts_like_lazy_when_the_router_says_draft(tmp_path):
    eng, draft, heavy = engine(tmp_path, "Employees receive 25 days of paid annual leave [1].")
    eng = eng.replace(router=_router(tmp_path, 0.3))
    ans = asyncio.run(eng.aask("How much annual leave?", policy="routed"))
    assert ans.tier == "draft" and ans.accepted and heavy.calls == [] and ans.route.route == "draft"
    # not routed: no route
    assert asyncio.run(eng.aask("How much annual leave?", policy="lazy")).route is None


async def _events(eng, q="How much annual leave?", **kw):
    return [e async for e in eng.astream(q, **kw)]


def test_ledger_rows_carry_the_route_and_old_ledgers_gain_the_column(tmp_path):
    old = tmp_path / "old.sqlite3"
    db = sqlite3.connect(old)
    db.executescript(ledger_mod.SCHEMA.replace(", route TEXT NOT NULL DEFAULT '', route_p REAL", ""))
    db.close()
    book = Ledger(old)
    attempt = Attempt("anthropic", "claude-sonnet-4-6", latency_ms=5.0, input_tokens=100,
                      output_tokens=10)
    with ledger_mod.scope("s1", "default", "q1"):
        book.record_attempts("heavy", [attempt])  # before routing: no route
        ledger_mod.tag_route(Route("heavy", 0.12, 0.35))
        book.record_attempts("heavy", [attempt])
    assert ledger_mod.current_scope().route == ""  # it ended with the question
    assert [(r["route"], r["route_p"]) for r in book.rows()] == [("", None), ("heavy", 0.12)]
    assert {r["key"] for r in book.summary(by="route")} == {"", "heavy"}


def _row(i, policy, correct, total, tokens=0, accepted=False):
    return {"id": f"q{i}", "policy": policy, "scores": {"contains": correct},
            "timings_ms": {"total": total, "heavy": total - 100, "rerank": 50},
            "heavy_tokens_in": tokens, "heavy_tokens_out": 0, "accepted": accepted,
            "verdict_score": 0.9 if accepted else 0.1, "abstained": False}


def test_routed_replay_pays_no_draft_for_questions_routed_heavy():
    # q0: the draft is accepted and right; q1: rejected; heavy-only answers both right in 5 s
    by = {"draft-only": [_row(0, "draft-only", 1.0, 2000, accepted=True),
                         _row(1, "draft-only", 0.0, 2000)],
          "heavy-only": [_row(0, "heavy-only", 1.0, 5000, 900), _row(1, "heavy-only", 1.0, 5000, 900)]}
    p = {"q0": 0.9, "q1": 0.1}
    lazy, routed, heavy = routed_at(by, p, 0.0), routed_at(by, p, 0.5), routed_at(by, p, 2.0)
    assert lazy["draft_share"] == 1.0 and lazy["heavy_tokens"] == 900
    assert routed["draft_share"] == 0.5 and routed["accuracy"] == 1.0
    # q1 costs heavy-only time (5000), not draft + heavy (2000 + 4950)
    assert routed["total_p50_ms"] == pytest.approx((2000 + 5000) / 2)
    assert lazy["total_p50_ms"] == pytest.approx((2000 + 6950) / 2)
    assert heavy["draft_share"] == 0.0 and heavy["heavy_tokens"] == 1800


def test_train_router_learns_from_recorded_rows_and_replays_the_curve(tmp_path):
    from specrag.grounding.verifier import Verifier
    from specrag.routing.features import route_features
    from specrag.training.router import train_router
    from tests.support.env import make_settings
    from tests.support.fakes import WordScorer

    rng = np.random.default_rng(1)
    rows = []
    for i in range(120):
        name, year = f"Bridge{i}", str(1900 + i)
        clear = i % 2 == 0  # one clear passage: the draft is right; else retrieval is flat
        chunk = f"The {name} opened in {year}." if clear else "Trains run every hour."
        top = 0.8 + 0.1 * rng.random() if clear else 0.35 + 0.1 * rng.random()
        hits = _hits([chunk, "Rivers are wide.", "Songs are short."], [top, 0.3, 0.28])
        q = f"When did the {name} open?"
        draft = f"The {name} opened in {year}." if clear else f"The {name} opened in 1850."
        common = {"id": f"q{i}", "question": q, "answers": [year], "gold_retrieved": True}
        rows.append({**common, "policy": "draft-only", "draft": draft, "verify_chunks": [chunk],
                     "route_features": route_features(q, hits),
                     "scores": {"contains": float(clear)},
                     "timings_ms": {"total": 2000}, "heavy_tokens_in": 0, "heavy_tokens_out": 0})
        rows.append({**common, "policy": "heavy-only", "scores": {"contains": 1.0},
                     "timings_ms": {"total": 5000, "heavy": 4900, "rerank": 50},
                     "heavy_tokens_in": 800, "heavy_tokens_out": 20})
    run = tmp_path / "run"
    run.mkdir()
    (run / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = make_settings(tmp_path / "data", **{"verify.acceptance": "off", "verify.threshold": 0.5})
    r = train_router([run], s, out=tmp_path / "router.json",
                     verifier=Verifier(s, scorer=WordScorer(), acceptance="off", threshold=0.5))
    assert r["questions"] == 120 and r["draft_will_do"] == pytest.approx(0.5)
    assert r["auroc_out_of_fold"] > 0.95  # a clear passage predicts a right draft
    assert r["threshold"] == pytest.approx(0.4)  # median draft path / heavy-only: 2000 / 5000
    shipped = RouterModel.load(tmp_path / "router.json")
    assert shipped.threshold == pytest.approx(0.4) and shipped.fitted_on == "run"
    points = {round(p["threshold"], 2): p for p in r["curve"]["run"]}
    lazy, routed = points[0.0], points[0.4]
    # routing the flat half straight to heavy: right as often, faster, same heavy tokens
    assert routed["accuracy"] == lazy["accuracy"] == 1.0
    assert routed["total_p50_ms"] < lazy["total_p50_ms"] and 0.4 < routed["draft_share"] < 0.6
    assert routed["tokens_vs_heavy_only"] == pytest.approx(0.5, abs=0.1)
    from dataclasses import asdict

    from specrag.cli.router import to_html, to_markdown

    shown = {**r, "model": asdict(r["model"])}
    assert "Routed policy over its threshold (run" in to_html(shown)
    assert "| 0.40 | " in to_markdown(shown) and "AUROC" in to_markdown(shown)


def test_the_page_and_the_cli_show_the_route(tmp_path, capsys):
    from specrag.cli.ask import _render, summary
    from specrag.ui.chat import render_turn
    from specrag.ui.turn import Turn

    eng, _, _ = engine(tmp_path, "Employees receive 25 days of paid annual leave [1].")
    eng = eng.replace(router=_router(tmp_path, 0.9))
    turn = Turn("How much annual leave?")
    for ev in asyncio.run(_events(eng, policy="routed")):
        turn.apply(ev)
        if ev.kind == "routed":
            assert "route heavy" in turn.note
    html = render_turn(turn)
    assert 'data-route="heavy"' in html and "P(draft will do) 0.50 &lt; 0.90" in html
    assert 'data-state="heavy"' in html  # no draft card: the draft never ran
    assert "route heavy 0.50" in summary(turn.answer)
    asyncio.run(_render(eng, "How much annual leave?", "routed", None))
    assert "route heavy (P(draft will do) 0.50 < 0.90)" in capsys.readouterr().out
