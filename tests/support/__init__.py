"""Helpers shared by the test files; no tests and no fixtures live here.

- ``env``: the repository root, the shared model cache, ``make_settings``, ``free_port``.
- ``docs``: documents built in memory (PDF, DOCX, HTML, Markdown, zips) and the small
  handbook and bad files written to disk.
- ``fakes``: deterministic stand-ins for the engine's models, the fake-model engines the
  engine, UI and security tests share, and ``launch`` for Gradio apps.
- ``resilience``: scripted generators, a fake clock and in-memory telemetry for the
  resilience and telemetry tests.
- ``servers``: real uvicorn servers on loopback, a slow fake-model ``Service`` and raw
  sockets, for the endpoint's edge tests.
- ``limits``: a heavy tier that holds questions until released and a quick users file,
  for the per-user limit tests.

Deliberately not here: pytest fixtures (``tests/conftest.py``) and product-side stand-ins
that the benchmarks use too (``specrag.testing``). A test file imports helpers from here,
never from another test file or from ``conftest``.
"""
