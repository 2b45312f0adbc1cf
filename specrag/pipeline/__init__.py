"""Putting the pipeline together: ``build`` is the one place that turns settings into it."""
