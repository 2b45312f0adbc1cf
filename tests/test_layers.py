"""The package's layers hold: every import, function-local ones too, goes downwards.

``[tool.importlinter]`` in pyproject.toml lists specrag's layers, highest first; import-linter
(through grimp, which sees imports inside functions) checks them. Apart from it, the
sub-packages (and top-level modules) must form no cycle: the graph ``pkgcycles`` draws,
every ``import``/``from ... import`` in a file counted, must have no strongly connected group.
The few edges the contract's ``ignore_imports`` names (each commented there) are left out of
both."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import specrag

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(specrag.__file__).parent
REPO = ROOT.parent


def contract() -> dict:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["importlinter"]["contracts"][0]


def ignored() -> set[tuple[str, str]]:
    pairs = set()
    for line in contract().get("ignore_imports", []):
        a, b = (s.strip() for s in line.split("->"))
        pairs.add((a, b))
    return pairs


def part(module: str) -> str | None:
    """The sub-package or top-level module of ``specrag`` that ``module`` belongs to."""
    parts = module.split(".")
    if parts[0] != "specrag" or len(parts) < 2:
        return None
    return parts[1]


def package_edges() -> dict[str, dict[str, set[str]]]:
    """``{part: {other part: {files importing it}}}``, ignored imports left out."""
    skip = ignored()
    edges: dict[str, dict[str, set[str]]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        me = part(name)
        if me is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets = []  # (module imported, the names it may be known by in ignore_imports)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    targets.append((full if node.module == "specrag" else node.module,
                                    {node.module, full}))
            elif isinstance(node, ast.Import):
                targets = [(a.name, {a.name}) for a in node.names]
            for target, known_as in targets:
                other = part(target)
                if other in (None, me, "__init__"):
                    continue
                if any(name == a and b in known_as for a, b in skip):
                    continue
                edges.setdefault(me, {}).setdefault(other, set()).add(
                    str(path.relative_to(REPO)))
    return edges


def cycles(edges: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan)."""
    nodes = sorted(set(edges) | {o for v in edges.values() for o in v})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in nodes:
        if v not in index:
            visit(v)
    return groups


def test_the_sub_packages_form_no_cycle():
    edges = package_edges()
    found = cycles(edges)
    lines = []
    for group in found:
        lines.append(" <-> ".join(group))
        for a in group:
            for b, files in sorted(edges.get(a, {}).items()):
                if b in group:
                    lines.append(f"  {a} -> {b}: {', '.join(sorted(files))}")
    assert not found, "package cycles:\n" + "\n".join(lines)


def test_every_part_of_the_package_has_a_layer():
    layers = {name for entry in contract()["layers"]
              for name in entry.replace("|", ":").replace(":", " ").split()}
    parts = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__")
             or (p.is_dir() and (p / "__init__.py").exists())}
    missing = sorted(f"specrag.{p}" for p in parts if f"specrag.{p}" not in layers)
    assert not missing, f"give these a layer in pyproject.toml's [tool.importlinter]: {missing}"


def test_the_layers_contract_is_kept():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which(
        "lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (requirements-test.txt)")
    run = subprocess.run([exe, "--no-cache"], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[report.find("Broken contracts"):] or report
