"""What the pipeline did and what it cost: OpenTelemetry (``telemetry``), the generation
call observer (``observe``), the SQLite usage ledger and budgets (``ledger``,
``budget``) and the sampled quality audit (``audit``).

Everything here is handed to the engine or the service as an explicit parameter by
``pipeline.build``; nothing patches them.

Deliberately not here: retries and failover (``resilience``).
"""
