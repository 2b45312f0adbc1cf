"""Resilience around the generators: retries, failover, breakers, admission.

- ``retry``: timeouts, backoff with jitter, retry budgets (``RetryingGenerator``)
- ``failover``, ``balance``, ``breaker``: ordered chains and endpoint pools with
  latency/failure circuit breakers (``FallbackGenerator``)
- ``attempts``, ``delivery``: the record of each attempt, and what happens to text
  already streamed when a call is tried again
- ``chains``: a tier's generator from ``resilience.*_chain`` settings
- ``concurrency``: admission gate (``BusyError``) and per-question tasks

Deliberately not here: tracing, the ledger and budgets (``observability``), the front
door that puts them together (``pipeline.service``).
"""
