"""``specrag train router RUN_DIR...``: fit the query router and print its report.

The report is the router's benchmark: out-of-fold AUROC per run and the routed policy
replayed over its threshold (accuracy, p50 latency and heavy tokens against heavy-only)
for runs that hold heavy-only rows; ``--report DIR`` also writes ``router.json`` (the
figures) and ``router.md``. Deliberately not here: the fitting (``training.router``).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from specrag.bench.e2e_report import _fmt
from specrag.types import SpecragError


def to_markdown(r: dict) -> str:
    m = r["model"]
    lines = [f"# Query router ({r['questions']} questions: {m['fitted_on']})", "",
             f"Label: the draft was accepted by today's verifier and right; "
             f"{_fmt(r['draft_will_do'], True)} of drafts. Out-of-fold AUROC "
             f"**{_fmt(r['auroc_out_of_fold'])}** (5 folds by question id). Shipped threshold "
             f"{r['threshold']} = median draft path / median heavy-only answer "
             f"({_fmt(r['draft_heavy_ratio'])}).", "",
             "| run | questions | draft will do | AUROC |", "|---|---|---|---|"]
    for run, x in r["per_run"].items():
        lines.append(f"| {run} | {x['questions']} | {_fmt(x['draft_will_do'], True)} | {_fmt(x['auroc'])} |")
    for run, points in r["curve"].items():
        lines += ["", f"## Routed policy replayed on `{run}` (out-of-fold router; recorded "
                      "generations)", "",
                  "| threshold | drafted | correct | heavy-only correct | accepted precision "
                  "| p50 vs heavy-only | heavy tokens vs heavy-only |", "|---|---|---|---|---|---|---|"]
        for pt in points[::2]:
            lines.append(f"| {pt['threshold']:.2f} | {_fmt(pt['draft_share'], True)} | "
                         f"{_fmt(pt['accuracy'], True)} | {_fmt(pt['heavy_only_accuracy'], True)} | "
                         f"{_fmt(pt['accepted_precision'], True)} | {_fmt(pt['p50_vs_heavy_only'])}x | "
                         f"{_fmt(pt['tokens_vs_heavy_only'])}x |")
    return "\n".join(lines) + "\n"


def to_html(r: dict) -> str:
    """The routed policy's curve over its threshold, per run with heavy-only rows."""
    import plotly.graph_objects as go

    # heavy: loaded when the command runs (CLI start-up)
    from specrag.bench.e2e_report import html_page

    figs = []
    for run, points in r["curve"].items():
        x = [p["threshold"] for p in points]
        fig = go.Figure([go.Scatter(x=x, y=[p[k] for p in points], name=label)
                         for k, label in (("accuracy", "correct"), ("draft_share", "drafted"),
                                          ("p50_vs_heavy_only", "final p50 vs heavy-only"),
                                          ("tokens_vs_heavy_only", "heavy tokens vs heavy-only"))])
        fig.add_hline(y=points[0]["heavy_only_accuracy"], line_dash="dot",
                      annotation_text="heavy-only correct")
        fig.add_vline(x=r["threshold"], line_dash="dash", annotation_text="shipped threshold")
        fig.update_layout(title=f"Routed policy over its threshold ({run}, out-of-fold)",
                          xaxis_title="routing.threshold")
        figs.append(fig)
    return html_page("specrag router", figs, to_markdown(r))


def cmd_train_router(args, settings) -> int:
    # heavy: loaded when the command runs (CLI start-up)
    from specrag.training.router import train_router

    if not args.runs:
        raise SpecragError("specrag train router needs one or more `bench e2e` run folders")
    r = train_router(args.runs, settings, out=Path(args.out) if args.out else None,
                     progress=not args.json)
    r = {**r, "model": asdict(r["model"])}
    if args.report:
        out = Path(args.report)
        out.mkdir(parents=True, exist_ok=True)
        (out / "router.json").write_text(json.dumps(r, indent=1))
        (out / "router.md").write_text(to_markdown(r))
        (out / "router.html").write_text(to_html(r))
    print(json.dumps(r, indent=1) if args.json else to_markdown(r) + f"\nrouter written to {r['path']}")
    return 0
