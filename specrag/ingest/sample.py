"""First visit: a sample knowledge base, so the app answers questions before any upload.

``assets/handbook/`` holds a short company handbook written for this project (leave,
expenses, security, on-call, remote work, benefits; Markdown, HTML and text with
concrete numbers). ``SampleKB(ingestor).start()`` ingests it into the
``handbook`` collection in a background thread when that collection is empty, so the
server starts at once; ``wait()`` blocks until it is done. ``EXAMPLES`` are questions
about it: the first ones are single facts a small draft model gets right (accepted),
the last ones need several passages combined (usually rejected, answered by the heavy
model).

With a users file, the sample is ingested on behalf of the first admin it lists (the
operator who configured the app: ``operator(settings)``), and skipped when it lists none;
the collection's ACL then decides who reads it (unlisted collections: admins only).

Deliberately not here: how files are ingested (``Ingestor``), UI layout.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from specrag.security.access import AccessControl
from specrag.security.users import LOCAL, Principal
from specrag.types import SpecragError

ASSETS = Path(__file__).resolve().parent.parent.parent / "assets"
SAMPLE_DIR = ASSETS / "handbook"
COLLECTION = "handbook"

EASY = ["How many days of paid annual leave do employees get?",
        "Within how many minutes must the on-call engineer acknowledge a page?",
        "How long must passwords be?"]
HARD = ["I was on call during a week with a public holiday and worked 3 hours of incidents "
        "at night. What am I paid and what time off do I get?",
        "Can I fly premium economy to a client meeting in New York, and what hotel rate "
        "may I book there?",
        "I live 80 km from the office: do I have to come in on anchor days, and what do I "
        "get towards coworking and internet?"]
EXAMPLES = EASY + HARD

log = logging.getLogger(__name__)


def operator(settings) -> Principal | None:
    """Who ingests the sample: the local user, or the users file's first admin (None: none)."""
    control = AccessControl(settings)
    if not control.enabled:
        return LOCAL
    try:
        users = control.directory().users.values()
    except SpecragError as err:
        log.warning("sample handbook: %s", err)
        return None
    admin = next((u for u in users if u.role == "admin"), None)
    return Principal(admin.name, admin.role) if admin else None


class SampleKB:
    def __init__(self, ingestor, collection: str = COLLECTION, folder: Path = SAMPLE_DIR,
                 principal: Principal | None = LOCAL):
        self.ingestor = ingestor
        self.principal = principal  # who the ingestion acts as (see ``operator``)
        self.collection = collection
        self.folder = Path(folder)
        self.status = "pending"
        self._done = threading.Event()

    def is_empty(self) -> bool:
        try:
            return not self.ingestor.store.documents(self.collection)
        except SpecragError:  # the collection does not exist yet
            return True

    def ensure(self) -> str:
        """Ingest the sample if the collection is empty; the outcome in a few words."""
        try:
            # the collection's write lock: an upload into it waits until the sample is in
            with self.ingestor.store.writing(self.collection):
                if not self.is_empty():
                    self.status = "present"
                else:
                    report = self.ingestor.ingest([self.folder], self.collection,
                                                  principal=self.principal)
                    ok = len(report.results) - len(report.failed)
                    self.status = f"ingested {ok} sample files"
                    for r in report.failed:
                        log.warning("sample handbook: %s", r.reason)
        except Exception as err:  # noqa: BLE001 - the app still runs without the sample
            self.status = f"failed: {type(err).__name__}: {str(err)[:200]}"
            log.warning("sample handbook not ingested: %s", self.status)
        finally:
            self._done.set()
        return self.status

    def start(self) -> "SampleKB":
        threading.Thread(target=self.ensure, daemon=True, name="specrag-sample").start()
        return self

    def skip(self, why: str = "") -> "SampleKB":
        self.status = f"skipped: {why}" if why else "skipped"
        self._done.set()
        return self

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)
