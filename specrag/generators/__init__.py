"""Text generation backends behind one small Protocol, picked by name from a registry."""

from specrag.generators.base import (
    GenerationError,
    Generator,
    Usage,
    collect,
    make_generator,
    register,
)

__all__ = ["Generator", "GenerationError", "Usage", "collect", "make_generator", "register"]
