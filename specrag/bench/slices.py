"""The end-to-end slices: single-hop, multi-hop, and passages that contradict the world.

``load_counterfactual_squad(settings, n, seed)`` (``datasets.counterfactual_squad``) is SQuAD
with answers swapped in dev- and test-split passages, so a model that answers from what it
knows of the world is wrong, and one that follows the documents is right.

``SLICES`` names the slices of the one-run benchmark (``specrag bench e2e --slices``):
``squad`` (single-hop), ``halueval-qa`` (multi-hop, HotpotQA questions) and
``counterfactual-squad``; ``combined(rows_by_slice)`` pools their rows into one overall
summary beside the per-slice ones.

Deliberately not here: running the policies (``e2e``) and rendering (``e2e_report``).
"""

from __future__ import annotations

from specrag.bench import e2e_report
from specrag.bench.e2e_report import _fmt, html_page
from specrag.datasets.counterfactual_squad import load_counterfactual_squad  # noqa: F401  (a slice)

SLICES = ("squad", "halueval-qa", "counterfactual-squad")
SLICE_KIND = {"squad": "single-hop", "halueval-qa": "multi-hop",
              "counterfactual-squad": "counterfactual"}


def combined(rows_by_slice: dict[str, list[dict]], meta: dict) -> dict:
    """One summary per slice and one over all their rows (ids made unique per slice)."""
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
