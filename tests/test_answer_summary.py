"""The timing/cost facts of an answer (pipeline.summary), as `specrag ask` and the app show them."""

import re
from types import SimpleNamespace

from specrag.cli.ask import summary
from specrag.pipeline.summary import cost_parts, timing_parts
from specrag.ui.chat import meta_line


def answer(**timings):
    return SimpleNamespace(tier="heavy", policy="lazy", cost_usd=0.0025, heavy_only_cost_usd=0.01,
                           timings_ms=timings, citations=(), route=None)


def test_stages_then_first_token_then_total_only_when_recorded():
    a = answer(total=2500.0, heavy=1200.0, retrieval=40.0, first_token=300.0, draft_ttft=9.0)
    assert timing_parts(a) == [("retrieval", 40.0), ("heavy", 1200.0), ("first token", 300.0),
                               ("total", 2500.0)]
    assert cost_parts(a) == (0.0025, 0.01, 0.75)
    assert cost_parts(SimpleNamespace(cost_usd=0.0, heavy_only_cost_usd=0.0))[2] is None


def test_cli_and_app_render_the_same_facts():
    a = answer(retrieval=40.0, draft=800.0, verify=90.0, first_token=300.0, total=1500.0)
    text = summary(a)
    assert text.startswith("answer from the heavy tier (lazy) · retrieval 0.04s · draft 0.80s")
    assert "first token 0.30s · total 1.50s · cost $0.00250 (heavy-only $0.01000)" in text
    html = meta_line(a)
    plain = re.sub(r"<[^>]+>", "", html)
    assert "retrieval 40 ms · draft 800 ms · verify 90 ms · first token 300 ms · total 1.50 s" \
        in plain
    assert "cost $0.0025 (heavy-only $0.0100 · saved 75%)" in plain
    labels = [label for label, _ in timing_parts(a)]
    assert all(label in text and label in plain for label in labels)
