"""Benchmarks that measure specrag on public data; each module is one ``specrag bench`` command."""
