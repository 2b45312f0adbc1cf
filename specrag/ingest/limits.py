"""What bounds the work of parsing one document, and the errors that say a bound was hit.

A few kilobytes can be built to cost minutes: a zip that inflates hundreds of times, a
PDF form drawn inside itself, HTML nested ten thousand deep. Each parser checks the
bound that fits its format as early as it can (declared zip sizes before inflating,
characters while extracting, nesting before building a tree); the isolated parser
process (``isolation``) adds a time and memory limit over all of them.

Deliberately not here: the parsers themselves, and settings (``chunking.max_chars``,
``chunking.parse_timeout_s``, ``chunking.parse_memory_mb`` carry these to them).
"""

from __future__ import annotations

from specrag.types import IngestError

MAX_ZIP_ENTRIES = 10_000
MAX_ZIP_TOTAL = 200_000_000
ZIP_RATIO = 20  # times the upload limit a .docx may declare in all
# Word's XML compresses 5-10x; hundreds of times is a file built to expand. Small files
# may compress better than that (one repeated style sheet), so only past the floor.
MAX_EXPANSION_RATIO = 100
EXPANSION_FLOOR = 10_000_000
MAX_DOCX_BLOCKS = 200_000  # paragraphs and table rows
# Nesting of HTML elements that can hold others (``markup.check_depth``): real pages stay
# far below this; beautifulsoup's tree edits get quadratically slower with depth.
MAX_HTML_DEPTH = 256
DEFAULT_MAX_CHARS = 10_000_000  # about 3,000 pages of dense text


class TextTooLong(BaseException):
    """Raised from inside an extractor once a document's text passes its ``max_chars``.

    A ``BaseException``: pypdf catches every ``Exception`` raised while it draws a form
    (and goes on to the next one), which would swallow the stop."""


def fail(source: str, reason: str) -> IngestError:
    """The one-line error every parser raises: ``"<name>: <reason>"``."""
    return IngestError(f"{source}: {reason}")


def too_long(source: str, max_chars: int) -> IngestError:
    return fail(source, f"too much text (more than {max_chars:,} characters; the limit is "
                        "chunking.max_chars)")


def mb(n: int) -> str:
    # Binary megabytes: callers derive limits as ``mb * 1024 * 1024``.
    value = n / 1_048_576
    return f"{value:.{1 if value >= 1 else 4}f}".rstrip("0").rstrip(".") + " MB"
