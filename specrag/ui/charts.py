"""The session's live chart: stage latencies, acceptance rate and cost, one point per answer.

``point(answer)`` keeps what the chart needs from a finished ``Answer`` (small and
picklable, so it can live in per-session state); ``figure(points)`` draws three panels
with plotly:

1. stacked stage latencies per question (retrieval, draft, verify, rerank, heavy; in the
   eager policy rerank and heavy overlap the draft, so a bar can exceed the total);
2. the running acceptance rate: accepted drafts / answers that had a verdict
   (heavy-only answers never draft, so they do not count either way);
3. the session's cumulative cost against what heavy-only would have cost; when every
   price is zero (all models local) a flat $0 line says nothing, so this panel shows the
   heavy-model tokens used against heavy-only's instead, and the line of text the time
   saved: each accepted draft against the session's mean heavy answer time.

``stats_markdown(points)`` is the same in one line of text.

Deliberately not here: timing or cost arithmetic beyond sums (the engine measures and
prices), and any Gradio code.
"""

from __future__ import annotations

from dataclasses import dataclass

STAGES = ("retrieval", "draft_pick", "draft", "verify", "rerank", "heavy")
COLORS = {"retrieval": "#94a3b8", "draft_pick": "#a78bfa", "draft": "#2f6fde",
          "verify": "#14b8a6", "rerank": "#f59e0b", "heavy": "#e11d48"}


@dataclass(frozen=True)
class Point:
    question: str
    tier: str
    accepted: bool | None  # None: no verdict (heavy-only, or nothing retrieved)
    stages_ms: tuple[float, ...]  # in STAGES order, 0 for a stage that did not run
    total_ms: float
    cost_usd: float
    heavy_only_usd: float
    heavy_tokens: int = 0  # input + output of the heavy tier for this answer
    heavy_only_tokens: int = 0


def point(answer) -> Point:
    t = answer.timings_ms
    u = answer.heavy.usage if answer.heavy is not None and answer.heavy.usage else None
    return Point(question=answer.question, tier=answer.tier,
                 accepted=None if answer.verdict is None else bool(answer.accepted),
                 stages_ms=tuple(float(t.get(s, 0.0)) for s in STAGES),
                 total_ms=float(t.get("total", 0.0)), cost_usd=float(answer.cost_usd),
                 heavy_only_usd=float(answer.heavy_only_cost_usd),
                 heavy_tokens=(u.input_tokens + u.output_tokens) if u else 0,
                 heavy_only_tokens=int(answer.heavy_only_tokens))


def priced(points: list[Point]) -> bool:
    """Does anything in this session cost money? (No: every model is local.)"""
    return any(p.cost_usd or p.heavy_only_usd for p in points)


def time_saved_ms(points: list[Point]) -> float | None:
    """Accepted drafts against the session's mean heavy-tier answer time (None before
    there is both an accepted draft and a heavy answer to compare with)."""
    heavy = [p.total_ms for p in points if p.tier == "heavy"]
    drafts = [p.total_ms for p in points if p.tier == "draft" and p.accepted]
    if not heavy or not drafts:
        return None
    mean = sum(heavy) / len(heavy)
    return sum(mean - d for d in drafts)


def acceptance(points: list[Point]) -> list[float | None]:
    """Running share of accepted drafts after each answer (None before any verdict)."""
    out, seen, ok = [], 0, 0
    for p in points:
        if p.accepted is not None:
            seen += 1
            ok += p.accepted
        out.append(ok / seen if seen else None)
    return out


def cumulative(values) -> list[float]:
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def _label(i: int, p: Point) -> str:
    q = p.question if len(p.question) <= 48 else p.question[:47] + "…"
    return f"Q{i} · {q}"


def figure(points: list[Point]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    money = priced(points)
    fig = make_subplots(rows=3, cols=1, vertical_spacing=0.13,
                        subplot_titles=("Stage latency per question (ms)",
                                        "Running draft acceptance rate",
                                        "Cumulative cost (USD)" if money else
                                        "Cumulative heavy-model tokens (local models)"))
    xs = [f"Q{i}" for i in range(1, len(points) + 1)]
    hover = [_label(i, p) for i, p in enumerate(points, 1)]
    for j, stage in enumerate(STAGES):
        fig.add_trace(go.Bar(x=xs, y=[p.stages_ms[j] for p in points], name=stage,
                             marker_color=COLORS[stage], customdata=hover, legendgroup="stages",
                             hovertemplate="%{customdata}<br>" + stage + ": %{y:.0f} ms"
                                           "<extra></extra>"), row=1, col=1)
    rate = acceptance(points)
    fig.add_trace(go.Scatter(x=xs, y=rate, mode="lines+markers", name="acceptance",
                             line=dict(color="#16a34a", width=2), customdata=hover,
                             hovertemplate="%{customdata}<br>accepted so far: %{y:.0%}"
                                           "<extra></extra>", showlegend=False), row=2, col=1)
    if money:
        mine, theirs = [p.cost_usd for p in points], [p.heavy_only_usd for p in points]
        spent, would = "spent: $%{y:.4f}", "heavy-only: $%{y:.4f}"
    else:
        mine, theirs = [p.heavy_tokens for p in points], [p.heavy_only_tokens for p in points]
        spent, would = "heavy tokens: %{y:,.0f}", "heavy-only: %{y:,.0f} tokens"
    fig.add_trace(go.Scatter(x=xs, y=cumulative(mine), name="this session",
                             mode="lines+markers", line=dict(color="#2f6fde", width=2),
                             hovertemplate=spent + "<extra></extra>"), row=3, col=1)
    fig.add_trace(go.Scatter(x=xs, y=cumulative(theirs),
                             name="heavy-only", mode="lines+markers",
                             line=dict(color="#e11d48", width=2, dash="dot"),
                             hovertemplate=would + "<extra></extra>"), row=3, col=1)
    fig.update_layout(barmode="stack", height=640, margin=dict(l=48, r=12, t=36, b=24),
                      paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)",
                      font=dict(size=11), legend=dict(orientation="h", y=-0.06, x=0),
                      hovermode="closest")
    fig.update_yaxes(gridcolor="#e5e7eb", zeroline=False)
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", row=2, col=1)
    if money:
        fig.update_yaxes(tickprefix="$", row=3, col=1)
    else:
        fig.update_yaxes(rangemode="tozero", row=3, col=1)  # not plotly's -1..1 for zeros
    if not points:
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        fig.add_annotation(text="Ask a question: each answer adds a point here.",
                           xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False,
                           font=dict(size=13, color="#64748b"))
    return fig


def stats_markdown(points: list[Point]) -> str:
    if not points:
        return "No answers yet in this session."
    rate = acceptance(points)[-1]
    spent = sum(p.cost_usd for p in points)
    heavy = sum(p.heavy_only_usd for p in points)
    verdicts = sum(p.accepted is not None for p in points)
    accepted = sum(bool(p.accepted) for p in points)
    rate_txt = f"{rate:.0%} ({accepted}/{verdicts})" if rate is not None else "n/a"
    n = len(points)
    head = f"**{n}** answer{'s' * (n != 1)} · drafts accepted **{rate_txt}** · "
    if priced(points):
        return head + f"spent **${spent:.4f}** vs heavy-only **${heavy:.4f}**"
    used = sum(p.heavy_tokens for p in points)
    would = sum(p.heavy_only_tokens for p in points)
    saved = time_saved_ms(points)
    saved_txt = f" · time saved **{saved / 1000:.1f} s**" if saved is not None else ""
    return head + f"heavy tokens **{used:,}** vs heavy-only **{would:,}**{saved_txt}"
