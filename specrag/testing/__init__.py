"""Test support that the benchmarks need too: not part of the serving pipeline.

Importing this package registers the ``fake`` generator backend (``FakeGenerator``: queued
replies, streamed word by word), so settings and chain entries such as ``fake:NAME``
work in tests and in ``bench chaos``. The app and the CLI never import it, so ``fake`` is
an unknown backend there.

Deliberately not here: the real backends (``generators``), mock HTTP APIs (``mockapi``).
"""

from specrag.testing.fake_generator import FakeGenerator

__all__ = ["FakeGenerator"]
