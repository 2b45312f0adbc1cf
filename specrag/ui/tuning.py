"""The app's "Tune this collection" action: ``specrag tune`` in the background.

``Tuner(settings, engines)`` starts one tune per collection in a daemon thread over the
app's own engine (``engine.replace``: the loaded models are shared, nothing is loaded
twice; chat keeps answering, on the same cores), and reports its state as Markdown:
running (questions written and answers collected so far, read from the tune's files),
failed (one line), or the last report (``report.md``). Only admins may start one
(``access.authorize(..., "admin")`` before the thread starts); anyone who may read the
collection may see its last report.

Deliberately not here: the steps (``specrag.tune``) and the layout (``ui.documents``).
"""

# no ``from __future__ import annotations``: Gradio reads the handlers' ``gr.Request``
# hints at runtime (see ``ui.documents``)
import math
import threading
import time
from pathlib import Path

from specrag.pipeline import profile
from specrag.pipeline.engine import SpeculativeRAG
from specrag.security.access import authorize
from specrag.security.crypto import DataFiles
from specrag.security.sanitize import safe_markdown
from specrag.tune.collect import load_jsonl
from specrag.tune.run import STEPS, check_steps, tune
from specrag.types import SpecragError, one_line
from specrag.ui.session import inner_engine


class Tuner:
    def __init__(self, settings, engines, questions: int = 40, steps=None):
        self.settings = settings
        self.engines = engines
        self.questions = questions
        self.steps = list(steps or STEPS)  # all, distillation included, as the CLI
        self._jobs: dict[str, dict] = {}
        self._lock = threading.Lock()

    def start(self, collection: str, who=None, *, questions: int | None = None,
              max_cost_usd: float | None = None, steps=None) -> str:
        """Start a tune of ``collection`` unless one runs; ``questions``, ``max_cost_usd``
        (None: no cap) and ``steps`` as ``specrag tune`` takes them (defaults: the Tuner's)."""
        authorize(self.settings, "admin", collection, who)  # security: admins only
        # checked here, so a bad value is the admin's message and not a failed thread
        steps = check_steps(steps) if steps else self.steps
        questions = self.questions if questions is None else questions
        if not math.isfinite(float(questions)) or float(questions) != int(questions) \
                or int(questions) < 4:
            raise SpecragError("a tune needs a whole number of at least 4 questions "
                               "(some are held out)")
        questions = int(questions)
        if max_cost_usd is not None and not (math.isfinite(max_cost_usd) and max_cost_usd >= 0):
            raise SpecragError("the cost cap must be 0 or more US dollars (0: free local "
                               "models only; blank: no cap)")
        with self._lock:
            job = self._jobs.get(collection)
            if job and job["thread"].is_alive():
                return self.status(collection, who)
            job = {"started": time.time(), "error": None, "steps": steps,
                   "questions": questions, "max_cost_usd": max_cost_usd}
            job["thread"] = threading.Thread(target=self._run, args=(collection, who, job),
                                             name=f"tune-{collection}", daemon=True)
            self._jobs[collection] = job
            job["thread"].start()
        return self.status(collection, who)

    def _run(self, collection, who, job) -> None:
        try:
            engine = inner_engine(self.engines.warm_up())
            if not isinstance(engine, SpeculativeRAG):
                raise SpecragError("this app's engine cannot be tuned")
            tune(self.settings, collection, questions=job["questions"], engine=engine,
                 principal=who, progress=False, steps=job["steps"],
                 max_cost_usd=job["max_cost_usd"])
        except Exception as exc:  # noqa: BLE001 - shown to the admin, the app goes on
            job["error"] = one_line(exc)

    def wait(self, collection: str, timeout: float | None = None) -> None:
        job = self._jobs.get(collection)
        if job:
            job["thread"].join(timeout)

    def status(self, collection: str, who=None) -> str:
        authorize(self.settings, "read", collection, who)
        job = self._jobs.get(collection)
        folder = profile.folder(self.settings, collection)
        if job and job["thread"].is_alive():
            files = DataFiles(self.settings)
            qs = len(load_jsonl(files, folder / "questions.jsonl"))
            rows = len(load_jsonl(files, folder / "rows.jsonl"))
            stage = ("distilling the draft model (tens of minutes on a small CPU)"
                     if (folder / "draft-f16.gguf").exists() or qs and rows >= 2 * qs
                     and "distill" in job["steps"] else "")
            cap = job["max_cost_usd"]
            return (f"Tuning **{safe_markdown(collection)}** ({', '.join(job['steps'])}; "
                    f"{job['questions']} questions"
                    f"{f', at most ${cap:.2f}' if cap is not None else ''}) for "
                    f"{time.time() - job['started']:.0f} s: {qs} questions written, "
                    f"{rows} answers collected{'; ' + stage if stage else ''}. "
                    "Chat keeps working meanwhile.")
        if job and job["error"]:
            return f"The last tune of {safe_markdown(collection)} failed: {safe_markdown(job['error'])}"
        report = folder / "report.md"
        if report.is_file():
            return report.read_text(encoding="utf-8")
        return f"{safe_markdown(collection)} has not been tuned yet."


_pages: Path | None = None


def reports(settings, who=None) -> tuple[str, list[str]]:
    """The last tune report of every collection ``who`` may read (markdown), and a copy of
    each one's plotly page in the temporary folder, where the app may serve it."""
    import shutil
    import tempfile

    root = settings.data_path / "tuning"
    parts, pages = [], []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if not (folder / "report.md").is_file():
            continue
        try:
            authorize(settings, "read", folder.name, who)
        except SpecragError:
            continue  # a collection this user may not read: not even its name
        parts.append(folder.joinpath("report.md").read_text(encoding="utf-8"))
        if (folder / "report.html").is_file():
            global _pages
            _pages = _pages or Path(tempfile.mkdtemp(prefix="specrag-tune-"))  # private (0700)
            page = _pages / f"{folder.name}.html"
            shutil.copyfile(folder / "report.html", page)
            pages.append(str(page))
    return ("\n".join(parts) or "No collection has been tuned yet (`specrag tune`, or "
            "Documents > Tune this collection)."), pages


def build_section(tuner: Tuner, collection, gr, who) -> None:
    """A "Tune this collection" button and its state, for the chosen collection."""

    def start(collection, questions, cap, steps, request: gr.Request):
        try:
            if not steps:
                raise SpecragError("choose at least one step")
            return tuner.start(collection, who(request), questions=questions,
                               max_cost_usd=None if cap in (None, "") else float(cap),
                               steps=steps)
        except SpecragError as err:  # PermissionDenied included: one plain line
            raise gr.Error(one_line(err)) from None

    def show(collection, request: gr.Request):
        try:
            return tuner.status(collection, who(request))
        except SpecragError as err:
            return one_line(err)

    with gr.Accordion("Tune this collection (admins)", open=False, elem_id="sr-tune"):
        gr.Markdown("Writes questions from this collection's documents, answers them with "
                    "both models, and keeps a calibration, a router and a distilled draft model "
                    "for the collection only if they beat the defaults on held-out questions "
                    "(`specrag tune`). Distillation takes tens of minutes on a small CPU; the "
                    "cost cap stops question writing and answering once spent.",
                    elem_classes="sr-help")
        with gr.Row():
            questions = gr.Number(tuner.questions, label="Questions", precision=0, minimum=4,
                                  elem_id="sr-tune-questions", scale=1)
            # blank: no cap; local models cost nothing, Claude is priced by the ledger
            cap = gr.Number(None, label="Cost cap (USD, blank: none)", minimum=0,
                            elem_id="sr-tune-cap", scale=1)
            steps = gr.CheckboxGroup(list(STEPS), value=list(tuner.steps), label="Steps",
                                     elem_id="sr-tune-steps", scale=2)
        with gr.Row():
            go = gr.Button("Tune this collection", elem_id="sr-tune-start", scale=1)
            again = gr.Button("Refresh", elem_id="sr-tune-refresh", scale=1)
        state = gr.Markdown(elem_id="sr-tune-state")
    go.click(start, [collection, questions, cap, steps], state, api_name="tune",
             concurrency_limit=1)
    again.click(show, collection, state, api_visibility="private", show_progress="hidden")
