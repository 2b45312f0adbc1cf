"""Aggregate end-to-end benchmark rows into figures, a threshold sweep and reports.

``summarize(rows, meta)`` returns per-policy accuracy (EM, F1, containment),
faithfulness, acceptance rate, accepted-draft precision, time to first visible token
and to final answer (p50/p95), heavy-model tokens and cost, each also as a ratio to
heavy-only from the same run, a per-stage latency breakdown, and a threshold sweep
that re-scores the run without generating again: for threshold t a question is
answered by its draft (from the ``draft-only`` rows) when the draft's verdict score
is at least t, else by the heavy answer (from the ``heavy-only`` rows); latency is the
draft path plus, when rejected, the heavy path. ``write(result, out)`` writes JSON,
Markdown and a self-contained plotly HTML report; ``render(path)`` re-renders.

Deliberately not here: running the models (``e2e``).
"""

from __future__ import annotations

import json
from pathlib import Path

from specrag.bench.metrics import percentile

STAGES = ("retrieval", "draft_pick", "draft", "verify", "rerank", "heavy")
CORRECT = "contains"  # an answer is "correct" when it contains a gold answer


def _mean(vals) -> float | None:
    vals = [v for v in vals if v is not None]
    return sum(vals) / len(vals) if vals else None


def _policy(rows: list[dict]) -> dict:
    scored = [r for r in rows if r.get("scores")]
    accepted = [r for r in rows if r["accepted"]]
    drafted = [r for r in rows if r.get("verdict_score") is not None]
    first = [r["timings_ms"].get("first_token") for r in rows]
    total = [r["timings_ms"].get("total") for r in rows]
    return {
        "n": len(rows),
        "em": _mean(r["scores"]["em"] for r in scored),
        "f1": _mean(r["scores"]["f1"] for r in scored),
        "contains": _mean(r["scores"]["contains"] for r in scored),
        "faithfulness": _mean(r.get("faithfulness") for r in rows),
        # the shown answer's own verdict: share the verifier found supported by the documents
        "supported": _mean(float(r["supported"]) for r in rows if r.get("supported") is not None),
        "acceptance_rate": len(accepted) / len(drafted) if drafted else None,
        "accepted_precision": _mean(r["scores"][CORRECT] for r in accepted if r.get("scores")),
        "first_token_p50_ms": percentile(first, 50), "first_token_p95_ms": percentile(first, 95),
        "total_p50_ms": percentile(total, 50), "total_p95_ms": percentile(total, 95),
        "heavy_tokens_in": sum(r["heavy_tokens_in"] for r in rows),
        "heavy_tokens_out": sum(r["heavy_tokens_out"] for r in rows),
        "heavy_tokens": sum(r["heavy_tokens_in"] + r["heavy_tokens_out"] for r in rows),
        "cost_usd": sum(r["cost_usd"] for r in rows),
        "gold_retrieved": _mean(float(r["gold_retrieved"]) for r in rows if r.get("gold_source")),
        # routed: the share the router sent to the draft tier
        "drafted_share": _mean(float(r["route"] == "draft") for r in rows if r.get("route")),
        "stages_ms": {st: _mean(r["timings_ms"].get(st) for r in rows) for st in STAGES},
    }


RATIO_KEYS = ("em", "f1", "contains", "first_token_p50_ms", "total_p50_ms", "total_p95_ms",
              "heavy_tokens", "cost_usd")


def summarize(rows: list[dict], meta: dict) -> dict:
    by = {}
    for r in rows:
        by.setdefault(r["policy"], []).append(r)
    policies = {p: _policy(rs) for p, rs in by.items()}
    base = policies.get("heavy-only")
    for p, fig in policies.items():
        fig["vs_heavy_only"] = {k: (fig[k] / base[k] if base and fig[k] is not None
                                    and base.get(k) else None) for k in RATIO_KEYS}
    return {"meta": meta, "policies": policies, "sweep": sweep(by), "rows": rows}


def sweep(by: dict[str, list[dict]], steps: int = 20) -> list[dict]:
    return [lazy_at(by, k / steps) for k in range(steps + 1)]


def lazy_at(by: dict[str, list[dict]], t: float | None) -> dict:
    """Lazy replayed at threshold ``t``: each question's draft (``draft-only`` row) when its
    verdict score is at least ``t``, else its ``heavy-only`` answer after the draft path.
    ``t=None``: the rows' own ``accepted`` (the verifier's decision, every gate applied)."""
    return replay(by, t)


def routed_at(by: dict[str, list[dict]], p_draft: dict[str, float], t: float) -> dict:
    """The ``routed`` policy replayed: questions whose router P(draft will do) is below
    ``t`` take their ``heavy-only`` answer at heavy-only time (no draft paid); the others
    run lazy on the rows' own verdicts. ``t=0``: lazy; ``t>1``: heavy-only."""
    return {**replay(by, None, {i for i, p in p_draft.items() if p >= t}), "threshold": t,
            "draft_share": sum(p >= t for p in p_draft.values()) / max(1, len(p_draft))}


def replay(by: dict[str, list[dict]], t: float | None, drafted: set | None = None) -> dict:
    """Lazy from the draft-only and heavy-only rows (``lazy_at``); a question not in
    ``drafted`` (when given) goes to the heavy tier at once."""
    drafts = {r["id"]: r for r in by.get("draft-only", [])}
    heavies = {r["id"]: r for r in by.get("heavy-only", [])}
    ids = [i for i in drafts if i in heavies and drafts[i].get("scores")]
    acc, lat, tokens, taken = [], [], 0, []
    for i in ids:
        d, h = drafts[i], heavies[i]
        if drafted is not None and i not in drafted:
            acc.append(h["scores"][CORRECT])
            lat.append(h["timings_ms"].get("total", 0))
            tokens += h["heavy_tokens_in"] + h["heavy_tokens_out"]
            continue
        ok = (bool(d.get("accepted")) if t is None else (d["verdict_score"] or 0) >= t) \
            and not d.get("abstained")
        chosen = d if ok else h
        acc.append(chosen["scores"][CORRECT])
        path = d["timings_ms"].get("total", 0)
        if not ok:
            path += h["timings_ms"].get("rerank", 0) + h["timings_ms"].get("heavy", 0)
            tokens += h["heavy_tokens_in"] + h["heavy_tokens_out"]
        lat.append(path)
        if ok:
            taken.append(d["scores"][CORRECT])
    return {"threshold": t, "accuracy": _mean(acc), "acceptance_rate":
            len(taken) / len(ids) if ids else None, "accepted_precision": _mean(taken),
            "total_p50_ms": percentile(lat, 50), "heavy_tokens": tokens, "questions": len(ids)}


def _fmt(v, pct=False) -> str:
    if v is None or v != v:  # none, or NaN (an AUROC over one class)
        return "–"
    if pct:
        return f"{100 * v:.1f}%"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}"


def to_markdown(result: dict) -> str:
    m, pols = result["meta"], result["policies"]
    order = [p for p in ("heavy-only", "draft-only", "lazy", "eager", "routed") if p in pols]
    lines = [f"# End-to-end benchmark: {m['dataset']}, n={m['n']}", "",
             f"draft `{m['draft']}`, heavy `{m['heavy']}`, threshold {m['threshold']}, corpus "
             f"{m['corpus_files']} documents; command: `{m['command']}`", "",
             "| metric | " + " | ".join(order) + " |", "|---|" + "---|" * len(order)]
    rows = [("exact match", "em", True), ("token F1", "f1", True),
            ("contains gold", "contains", True), ("faithfulness", "faithfulness", False),
            ("shown answer supported", "supported", True),
            ("acceptance rate", "acceptance_rate", True),
            ("accepted-draft precision", "accepted_precision", True),
            ("first token p50 ms", "first_token_p50_ms", False),
            ("first token p95 ms", "first_token_p95_ms", False),
            ("final answer p50 ms", "total_p50_ms", False),
            ("final answer p95 ms", "total_p95_ms", False),
            ("heavy tokens in", "heavy_tokens_in", False),
            ("heavy tokens out", "heavy_tokens_out", False), ("cost USD", "cost_usd", False),
            ("gold passage retrieved", "gold_retrieved", True),
            ("routed to draft", "drafted_share", True)]
    for label, key, pct in rows:
        lines.append(f"| {label} | " + " | ".join(_fmt(pols[p].get(key), pct) for p in order) + " |")
    lines += ["", "Ratios to heavy-only (same run):", "",
              "| ratio | " + " | ".join(order) + " |", "|---|" + "---|" * len(order)]
    for key in RATIO_KEYS:
        lines.append(f"| {key} | " + " | ".join(_fmt(pols[p]["vs_heavy_only"][key])
                                               for p in order) + " |")
    lines += ["", "Mean stage latency (ms):", "", "| stage | " + " | ".join(order) + " |",
              "|---|" + "---|" * len(order)]
    for st in STAGES:
        lines.append(f"| {st} | " + " | ".join(_fmt(pols[p]["stages_ms"][st]) for p in order) + " |")
    if result["sweep"]:
        lines += ["", "Threshold sweep (re-scored from draft-only and heavy-only rows):", "",
                  "| threshold | accuracy | acceptance | accepted precision | p50 ms | heavy tokens |",
                  "|---|---|---|---|---|---|"]
        for s in result["sweep"][::2]:
            lines.append(f"| {s['threshold']:.2f} | {_fmt(s['accuracy'], True)} | "
                         f"{_fmt(s['acceptance_rate'], True)} | "
                         f"{_fmt(s['accepted_precision'], True)} | {_fmt(s['total_p50_ms'])} | "
                         f"{s['heavy_tokens']:,} |")
    return "\n".join(lines) + "\n"


def to_html(result: dict) -> str:
    import plotly.graph_objects as go

    rows, pols = result["rows"], result["policies"]
    lat = go.Figure([go.Box(y=[r["timings_ms"].get("total", 0) / 1000 for r in rows
                               if r["policy"] == p], name=p) for p in pols])
    lat.update_layout(title="Time to final answer (s) per policy", yaxis_title="seconds")
    acc = go.Figure(go.Scatter(x=[pols[p]["cost_usd"] + pols[p]["heavy_tokens"] / 1e6 for p in pols],
                               y=[pols[p]["contains"] for p in pols], text=list(pols),
                               mode="markers+text", textposition="top center"))
    acc.update_layout(title="Accuracy (contains gold) vs heavy tokens (M) + cost",
                      xaxis_title="heavy-model tokens (millions) + USD", yaxis_title="accuracy")
    sw = result["sweep"]
    curve = go.Figure([go.Scatter(x=[s["threshold"] for s in sw], y=[s[k] for s in sw], name=k)
                       for k in ("accuracy", "acceptance_rate", "accepted_precision")])
    curve.add_vline(x=result["meta"]["threshold"], line_dash="dash",
                    annotation_text="calibrated threshold")
    curve.update_layout(title="Acceptance and accuracy vs verifier threshold",
                        xaxis_title="threshold")
    return html_page("specrag e2e benchmark", [lat, acc, curve], to_markdown(result))


def html_page(title: str, figures, markdown: str) -> str:
    """One self-contained page: the plotly figures (plotly.js once) and the Markdown report."""
    parts = [f.to_html(full_html=False, include_plotlyjs=i == 0) for i, f in enumerate(figures)]
    md = markdown.replace("&", "&amp;").replace("<", "&lt;")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            "<body style='font-family:sans-serif;max-width:1100px;margin:auto'>"
            + "".join(parts) + f"<pre>{md}</pre></body></html>")


def write(result: dict, out: Path) -> None:
    out = Path(out)
    (out / "e2e.json").write_text(json.dumps(result, indent=1))
    (out / "e2e.md").write_text(to_markdown(result))
    (out / "e2e.html").write_text(to_html(result))


def render(path: str) -> Path:
    """Re-render the Markdown and HTML reports of a finished run from its JSON."""
    p = Path(path)
    result = json.loads(p.read_text())
    write(result, p.parent)
    return p.parent
