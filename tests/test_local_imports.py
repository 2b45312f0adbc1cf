"""Every import of a specrag module inside a function names a module and a name that exist.

Function-local imports run only when their function does: ``specrag train draft``
imported a module that had never existed, and nothing noticed until a user ran it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import specrag

ROOT = Path(specrag.__file__).parent


def local_imports():
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specrag"):
                    yield path.relative_to(ROOT.parent), node.lineno, node.module, [
                        a.name for a in node.names]


def test_every_function_local_specrag_import_resolves():
    missing = []
    for path, line, module, names in local_imports():
        try:
            mod = importlib.import_module(module)
        except ImportError as err:
            if "specrag" in str(err):
                missing.append(f"{path}:{line}: {module} ({err})")
            continue  # an optional third-party dependency the module needs
        for name in names:
            if not hasattr(mod, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{path}:{line}: {module}.{name}")
    assert not missing, "\n".join(missing)
