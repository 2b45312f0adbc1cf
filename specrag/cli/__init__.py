"""The ``specrag`` command: one ``argparse`` tree (``main``) and one module per command
group (``docs``, ``config``, ``ask``, ``audit``, ``models``, ``usage``, ``users``,
``bench``), each with ``add_parsers(sub)`` registering ``set_defaults(func=cmd_<name>)``
and ``cmd_<name>(args, settings) -> int`` handlers.

Deliberately not here: any pipeline decision (the commands build through
``pipeline.build`` and render its events) or benchmark code (``specrag.bench``).
"""
