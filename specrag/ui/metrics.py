"""The Metrics tab: what answering cost (the usage ledger) and how good it was (the audit).

``snapshot(engines, session_id)`` gathers plain data from the reporting APIs: this
session's usage and budget (``Service.usage(by=..., session=...)``,
``Service.budget_status``), every session's usage by session, model and collection, and
the quality audit's summary and recent samples (``AuditStore``: faithfulness, context
relevance), and the last ``specrag tune`` report of each collection (``ui.tuning.reports``). The ``*_markdown`` and ``*_rows`` functions render it; ``build_tab`` lays the
tab out with a refresh button and registers the ``/metrics`` API endpoint (-> the
snapshot as a dict). With a users file only admins may see it (``allowed``: the
``admin`` access check); in single-user local mode everyone does.

Deliberately not here: counting, pricing and scoring (``observability.ledger``, ``observability.audit``),
budget decisions (``observability.budget``), the tab's visibility per user (``app``).
"""

# no ``from __future__ import annotations``: Gradio reads the ``gr.Request`` hints of the
# handlers at runtime, and ``gr`` is a parameter here, not a module global
import datetime as dt

from specrag.observability.audit import AuditStore
from specrag.security.access import authorize
from specrag.types import SpecragError
from specrag.ui.session import inner_engine
from specrag.ui.tuning import reports

USAGE_HEADERS = ["questions", "attempts", "failed", "tokens in", "tokens out", "cost USD"]
AUDIT_HEADERS = ["id", "time (UTC)", "collection", "tier", "accepted", "verdict",
                 "faithfulness", "relevance", "question"]
RECENT = 20
AUDIT_FIELDS = ("id", "ts", "collection", "tier", "policy", "accepted", "verdict_score",
                "faithfulness", "context_relevance", "question")


def allowed(settings, who) -> bool:
    """Whether ``who`` may see every session's spending: admins (everyone in local mode)."""
    try:
        authorize(settings, "admin", None, who)
        return True
    except SpecragError:
        return False


def audit_store(engines, fallback: AuditStore | None = None) -> AuditStore:
    """The engine's auditor's store, else ``fallback`` (the data directory's audit file)."""
    auditor = getattr(inner_engine(engines.base()), "auditor", None)
    store = getattr(auditor, "store", None)
    return store or fallback or AuditStore.from_settings(engines.settings)


def snapshot(engines, session_id: str | None, recent: int = RECENT,
             fallback: AuditStore | None = None) -> dict:
    """Everything the tab shows, as JSON-ready data."""
    session_id = session_id or "anonymous"
    out = {"session": session_id, "ledger": False, "budget": {}, "this_session": [],
           "sessions": [], "models": [], "collections": []}
    service = engines.service
    if service is not None:
        out["sessions"] = service.usage(by="session")
        out["ledger"] = service.ledger is not None
    if out["ledger"]:
        out["this_session"] = service.usage(by="model", session=session_id)
        out["models"] = service.usage(by="model")
        out["collections"] = service.usage(by="collection")
        out["budget"] = service.budget_status(session_id)
    warmer = getattr(service, "warmer", None)
    out["warm"] = dict(warmer.report) if warmer is not None else {}
    store = audit_store(engines, fallback)
    out["audit"] = {"summary": store.summary(),
                    "recent": [{k: r.get(k) for k in AUDIT_FIELDS} for r in store.recent(recent)]}
    return out


# -- rendering --------------------------------------------------------------------------
def _usd(v) -> str:
    return f"${float(v or 0):.4f}"


def _score(v) -> str:
    return "–" if v is None else f"{v:.2f}"


def usage_rows(rows: list[dict]) -> list[list]:
    return [[str(r["key"]), r["questions"], r["attempts"], r["failed"] or 0,
             r["input_tokens"] or 0, r["output_tokens"] or 0, round(r["cost_usd"] or 0.0, 6)]
            for r in rows]


def session_markdown(data: dict) -> str:
    if not data["ledger"]:
        return ("No usage ledger: this engine is not wrapped in a `Service`, or "
                "`budget.ledger` is off.")
    mine = data["this_session"]
    asked = sum(r["questions"] for r in mine)
    tokens = sum((r["input_tokens"] or 0) + (r["output_tokens"] or 0) for r in mine)
    spent = sum(r["cost_usd"] or 0 for r in mine)
    head = (f"**This session** (`{data['session'][:12]}`): **{asked}** question"
            f"{'s' * (asked != 1)} · {tokens:,} tokens · **{_usd(spent)}**")
    b = data["budget"]
    if not b:
        return head + warm_markdown(data.get("warm") or {})
    limit, day_limit = b.get("session_limit_usd"), b.get("day_limit_usd")
    budget = (f"session budget {_usd(b['session_spent_usd'])} of {_usd(limit)}" if limit
              else "no session budget")
    day = (f"today ({b['day']} UTC, all sessions) {_usd(b['day_spent_usd'])}"
           + (f" of {_usd(day_limit)}" if day_limit else " (no daily budget)"))
    return f"{head}  \n{budget} · {day}" + warm_markdown(data.get("warm") or {})


def warm_markdown(warm: dict) -> str:
    """A line on the draft prompts warmed ahead of questions (``pipeline.warm_states``)."""
    if not warm:
        return ""
    parts = [f"{name}: {r['total']} chunks, {r['state_mb']} MB" if r.get("total")
             else f"{name}: none ({r['skipped'] or 'nothing to warm'})"
             for name, r in sorted(warm.items())]
    return "  \nDraft prompts warmed ahead of questions: " + " · ".join(parts)


def audit_markdown(summary: dict) -> str:
    n = summary.get("samples") or 0
    if not n:
        return ("No audited answers yet: a sample of answers (`audit.sample_rate`) is scored "
                "in the background for faithfulness and context relevance.")
    acc = summary.get("acceptance_rate")
    return (f"**{n}** sampled answer{'s' * (n != 1)}, **{summary.get('scored') or 0}** scored · "
            f"faithfulness **{_score(summary.get('faithfulness'))}** · context relevance "
            f"**{_score(summary.get('context_relevance'))}** · drafts accepted "
            f"**{'–' if acc is None else f'{acc:.0%}'}**")


def audit_rows(recent: list[dict]) -> list[list]:
    def when(ts):
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") \
            if ts else ""

    # a plain-text table (Dataframe "str" cells): questions are shown, never rendered
    return [[r["id"], when(r["ts"]), r["collection"] or "", r["tier"] or "",
             "yes" if r["accepted"] else "no", _score(r["verdict_score"]),
             _score(r["faithfulness"]), _score(r["context_relevance"]), r["question"] or ""]
            for r in recent]


def render(data: dict) -> tuple:
    """The tab's outputs, in ``build_tab``'s order."""
    return (session_markdown(data), usage_rows(data["sessions"]), usage_rows(data["models"]),
            usage_rows(data["collections"]), audit_markdown(data["audit"]["summary"]),
            audit_rows(data["audit"]["recent"]))


# -- layout -----------------------------------------------------------------------------
def build_tab(engines, settings, gr, who):
    """The tab's components and events; ``who(request)`` is the request's ``Principal``."""

    fallback = AuditStore.from_settings(settings)  # opened on first use only

    def data_for(request) -> dict:
        if not allowed(settings, who(request)):
            raise gr.Error("The metrics are for admins only.")
        return snapshot(engines, getattr(request, "session_hash", None), fallback=fallback)

    def refresh(request: gr.Request):
        text, pages = reports(settings, who(request))
        return (*render(data_for(request)), text, pages or None)

    def metrics(request: gr.Request = None) -> dict:
        """Usage from the ledger (this session, all sessions by session, model and
        collection), this session's budget, and the quality audit (admins only)."""
        return data_for(request)

    gr.Markdown("What answering has cost, from the usage ledger (every generation attempt, "
                "retries and failovers included), and how good the answers were, from the "
                "background quality audit of a sample of them.", elem_classes="sr-help")
    with gr.Row(equal_height=True):
        session = gr.Markdown(elem_id="sr-metrics-session")
        button = gr.Button("Refresh", scale=0, min_width=110, elem_id="sr-metrics-refresh")
    with gr.Row(equal_height=False):
        sessions = gr.Dataframe(headers=["session", *USAGE_HEADERS], interactive=False,
                                label="All sessions", elem_id="sr-usage-sessions",
                                max_height=300)
        models = gr.Dataframe(headers=["model", *USAGE_HEADERS], interactive=False,
                              label="By model", elem_id="sr-usage-models", max_height=300)
    collections = gr.Dataframe(headers=["collection", *USAGE_HEADERS], interactive=False,
                               label="By collection", elem_id="sr-usage-collections",
                               max_height=240)
    gr.Markdown("### Answer quality (audit)")
    audit = gr.Markdown(elem_id="sr-audit-summary")
    recent = gr.Dataframe(headers=AUDIT_HEADERS, interactive=False, wrap=True,
                          label="Recent audited answers", elem_id="sr-audit-recent",
                          max_height=360)
    gr.Markdown("### Tuned collections")
    tuned = gr.Markdown(elem_id="sr-tune-reports")
    pages = gr.File(label="Tune reports (plotly pages: download and open)", file_count="multiple",
                    interactive=False, elem_id="sr-tune-pages")
    outputs = [session, sessions, models, collections, audit, recent, tuned, pages]
    button.click(refresh, None, outputs, api_visibility="private", show_progress="minimal")
    gr.api(metrics, api_name="metrics")
    return refresh, outputs
