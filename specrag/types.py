"""Typed records that flow between specrag's stages.

Every stage takes and returns these frozen dataclasses; copy with
``dataclasses.replace`` instead of mutating. This module holds data only:
no I/O, no models.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal


class SpecragError(Exception):
    """Base class for errors that carry a one-line, user-facing reason."""


def one_line(err: BaseException) -> str:
    """An error's first line, for a user to read (its type when it has no text)."""
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


# a knowledge base's name (``retrieval.store`` names its Chroma collections after it; the
# users file's access lists name it too)
_COLLECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,48}[a-z0-9]$|^[a-z0-9]$")


def check_collection_name(name: str) -> str:
    """``name`` when it is a valid knowledge-base name (a Chroma collection suffix), else a
    ``SpecragError`` saying why."""
    if not _COLLECTION_NAME.match(name or ""):
        raise SpecragError(f"collection name '{name}' is invalid: use 1-50 lowercase letters, "
                           "digits, '-' or '_', starting and ending with a letter or digit")
    return name


class IngestError(SpecragError):
    """A file could not be ingested; ``str(err)`` is the one-line reason."""


class ModelUnavailable(SpecragError):
    """A model for a role cannot be loaded; the message names the setting to change."""


@dataclass(frozen=True)
class Section:
    """A run of text from a parsed document, with where it came from.

    ``start`` is the character offset of ``text`` inside ``ParsedDocument.text``.
    """

    text: str
    start: int
    page: int | None = None
    heading: str | None = None


@dataclass(frozen=True)
class ParsedDocument:
    """A file turned into plain text plus the sections it was made of."""

    source: str  # file name as the user knows it (no directories)
    format: Literal["pdf", "docx", "html", "markdown", "text"]
    text: str
    sections: tuple[Section, ...]
    sha256: str  # of the original bytes
    size_bytes: int
    pages: int | None = None


@dataclass(frozen=True)
class Chunk:
    """One stored unit of retrieval; offsets point into the document's text."""

    id: str
    doc_id: str
    source: str
    text: str
    index: int
    start: int
    end: int
    content_hash: str
    version: str  # sha256 of the document bytes this chunk was cut from
    page: int | None = None
    heading: str | None = None
    collection: str = "default"


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk with its cosine similarity and 1-based rank."""

    chunk: Chunk
    score: float
    rank: int


@dataclass(frozen=True)
class DocumentInfo:
    """What the store knows about one ingested document."""

    doc_id: str
    source: str
    version: str
    chunks: int
    size_bytes: int
    format: str
    ingested_at: float
    pages: int | None = None


@dataclass(frozen=True)
class FileResult:
    """Outcome of ingesting one file: the UI and CLI print these as they come."""

    source: str
    status: Literal["added", "replaced", "unchanged", "failed"]
    chunks: int = 0
    reason: str = ""
    doc_id: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class IngestReport:
    """All file results of one batch, in input order."""

    results: tuple[FileResult, ...] = field(default_factory=tuple)

    @property
    def failed(self) -> tuple[FileResult, ...]:
        return tuple(r for r in self.results if r.status == "failed")

    @property
    def chunks_added(self) -> int:
        return sum(r.chunks for r in self.results if r.status in ("added", "replaced"))


@dataclass(frozen=True)
class Usage:
    """What one generation used: the record a generator's ``stream`` ends with
    (``generators.base``)."""

    backend: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    cancelled: bool = False
    # the log-probability of each token the model chose, where the backend reports it
    # (llama.cpp: ``generators.confidence``); bench rows keep the draft's. Empty when
    # unknown.
    logprobs: tuple[float, ...] = ()
    # prompt tokens not prefilled because the server's prompt cache held them (llama.cpp's
    # ``cache_n``: ``generators.llama_server``)
    state_tokens: int = 0
