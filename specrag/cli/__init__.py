"""The ``specrag`` command: one ``argparse`` tree (``main``) and one module per command
group, each with ``add_parsers(sub)`` and ``cmd_*(args, settings)`` functions.

Deliberately not here: any pipeline decision (the commands build through
``pipeline.build`` and render its events).
"""
