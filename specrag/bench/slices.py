"""The end-to-end slices: single-hop, multi-hop, and passages that contradict the world.

``load_counterfactual_squad(settings, n, seed)`` is SQuAD with a twist built by code: for
questions over *dev- and test-split* passages (``training.data.split_of``: the
verifier's weights never saw them) whose answer is a year, number, month or name, the passage's
answer is swapped everywhere for another value of the same type
(``training.swaps.swap_answer``; a name for one of the five most alike of its kind,
``training.answer_kinds``: a river for a river, a nationality for a nationality) and the
gold answer becomes the new value. The swapped
passage replaces the original in the corpus (one question per passage, so no other
question reads a changed paragraph), so a model that answers from what it knows of the
world is wrong, and one that follows the documents is right.

``SLICES`` names the slices of the one-run benchmark (``specrag bench e2e --slices``):
``squad`` (single-hop), ``halueval-qa`` (multi-hop, HotpotQA questions) and
``counterfactual-squad``; ``combined(rows_by_slice)`` pools their rows into one overall
summary beside the per-slice ones.

Deliberately not here: running the policies (``e2e``) and rendering (``e2e_report``).
"""

from __future__ import annotations

import random
import re

from specrag.datasets import Passage, QADataset, QAItem, _sample, load_squad, passage_id
from specrag.settings import Settings

SLICES = ("squad", "halueval-qa", "counterfactual-squad")
SLICE_KIND = {"squad": "single-hop", "halueval-qa": "multi-hop",
              "counterfactual-squad": "counterfactual"}


def load_counterfactual_squad(settings: Settings, n: int | None = None, seed: int = 0,
                              embedder=None) -> QADataset:
    """``embedder``: the one that ranks same-kind names (the settings' own, loaded here when
    None; a caller that has it loaded already passes it)."""
    from specrag.retrieval.embedder import Embedder
    from specrag.training.answer_kinds import for_items
    from specrag.training.data import split_of
    from specrag.training.swaps import answer_pools, swap_answer, whole

    ds = load_squad(settings)
    by_id = ds.passages_by_id()
    found = []  # (passage id, text, question, answer) with the answer in the passage
    for it in ds.items:
        p = by_id[it.gold_passage_id]
        a = next((a for a in it.answers if a and re.search(whole(a), p.text)), None)
        if a:
            found.append((p.id, p.text, it.question, a, it))
    pools = answer_pools([f[:4] for f in found])
    like = for_items([f[:4] for f in found], embedder or Embedder(settings).warm_up())
    rng = random.Random(seed)
    swapped: dict[str, Passage] = {}
    items: list[QAItem] = []
    for pid, text, q, a, it in found:
        if pid in swapped or split_of(pid) == "train":
            continue
        out = swap_answer(text, q, a, pools, rng, like)
        if out is None:
            continue
        new_text, new = out
        p = Passage(passage_id(new_text), new_text, by_id[pid].title)
        swapped[pid] = p
        items.append(QAItem(f"cf-{it.id}", q, (new,), p.id))
    passages = [swapped.get(p.id, p) for p in ds.passages]
    return QADataset("counterfactual-squad", passages, _sample(items, n, seed))


def combined(rows_by_slice: dict[str, list[dict]], meta: dict) -> dict:
    """One summary per slice and one over all their rows (ids made unique per slice)."""
    from specrag.bench import e2e_report

    out = {name: e2e_report.summarize(rows, {**meta, "slice": name})
           for name, rows in rows_by_slice.items()}
    pooled = [{**r, "id": f"{name}/{r['id']}"} for name, rows in rows_by_slice.items()
              for r in rows]
    out["overall"] = e2e_report.summarize(pooled, {**meta, "slice": "overall"})
    return out


COLUMNS = (("contains", "correct", True), ("accepted_precision", "accepted precision", True),
           ("first_token_p50_ms", "first token p50", False), ("total_p50_ms", "final p50", False),
           ("total_p95_ms", "final p95", False), ("heavy_tokens", "heavy tokens", False),
           ("drafted_share", "routed to draft", True))


def to_markdown(summaries: dict) -> str:
    """Per slice and overall: one row per policy, ratios to heavy-only where they mean something."""
    from specrag.bench.e2e_report import _fmt

    lines = []
    for name, result in summaries.items():
        kind = SLICE_KIND.get(name, "all slices" if name == "overall" else "")
        pols = result["policies"]
        n = max((p["n"] for p in pols.values()), default=0)
        lines += [f"## {name} ({kind}, {n} questions)", "",
                  "| policy | " + " | ".join(c[1] for c in COLUMNS) + " |",
                  "|---|" + "---|" * len(COLUMNS)]
        for pol, fig in pols.items():
            cells = []
            for key, _, pct in COLUMNS:
                ratio = fig["vs_heavy_only"].get(key) if pol != "heavy-only" else None
                cell = _fmt(fig.get(key), pct)
                cells.append(cell + (f" ({ratio:.2f}x)" if ratio is not None else ""))
            lines.append(f"| {pol} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def to_html(summaries: dict) -> str:
    """Per-slice bars: correct and final-answer p50 against heavy-only, one bar per policy."""
    import plotly.graph_objects as go

    from specrag.bench.e2e_report import html_page

    names = list(summaries)
    pols = list(dict.fromkeys(p for r in summaries.values() for p in r["policies"]))
    figs = []
    for key, title, ratio in (("contains", "Correct (contains gold) per slice", False),
                              ("total_p50_ms", "Final answer p50 vs heavy-only per slice", True)):
        bars = [go.Bar(name=pol, x=names,
                       y=[(summaries[n]["policies"].get(pol, {}).get("vs_heavy_only", {}).get(key)
                           if ratio else summaries[n]["policies"].get(pol, {}).get(key))
                          for n in names]) for pol in pols]
        fig = go.Figure(bars)
        fig.update_layout(title=title, barmode="group")
        figs.append(fig)
    return html_page("specrag slices", figs, to_markdown(summaries))
