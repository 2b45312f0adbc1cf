"""specrag: speculative RAG. Draft fast from a broad retrieved set, verify, escalate.

The public API grows with each tier; today: settings, ingestion and retrieval.
"""

from .settings import Settings
from .types import Chunk, DocumentInfo, FileResult, Hit, IngestReport

__version__ = "0.1.0"
__all__ = ["Settings", "Chunk", "DocumentInfo", "FileResult", "Hit", "IngestReport"]
