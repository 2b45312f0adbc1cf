"""Resilience, observability and cost control around the generators and the engine.

- ``retry``: timeouts, backoff with jitter, retry budgets (``RetryingGenerator``)
- ``failover``, ``balance``, ``breaker``: ordered chains and endpoint pools with
  latency/failure circuit breakers (``FallbackGenerator``)
- ``delivery``: what happens to text already streamed when a call is tried again
- ``chains``: a tier's generator from ``resilience.*_chain`` settings
- ``telemetry``, ``instrument``: OpenTelemetry spans and metrics
- ``ledger``, ``budget``: SQLite usage ledger, spending limits
- ``concurrency``: admission gate (``BusyError``) and per-question tasks
- ``service``: all of it around the engine (``Service``)

Submodules are imported on use; this package imports nothing heavy.
"""
