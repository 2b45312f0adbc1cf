"""Security and data safety: who may do what, what leaves the machine, what lands on disk.

- ``users``: users, roles and collection ACLs from a YAML file; bcrypt passwords.
- ``access``: ``authorize()``, the one check every library entry point makes.
- ``pii`` / ``redact`` / ``redacting``: PII placeholders before third-party model calls,
  restored in the answer; ``pii_eval`` measures the detector on a generated set.
- ``crypto`` / ``uploads``: AES-256-GCM for files specrag writes besides the vector
  store; uploads taken into memory and wiped from the web server's temp folder.
- ``sanitize``: limits on questions and safe rendering of document text.
- ``cli``: ``specrag users ...`` and ``specrag --user NAME``.

Deliberately not here: the app's login wiring (``specrag.ui.auth``) and parser limits
(``specrag.ingest.parsers``).
"""
