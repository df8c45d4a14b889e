"""The import contract of ``src/``: the library (``seqrec``) never imports the research layer
(``seqrec_lab``), and no module imports itself back through others (no import cycles), counting
every import statement, function-local and ``TYPE_CHECKING`` ones included.

Checked statically from the source (``ast``): nothing is imported, so the check is fast and
needs no dependency. Why a test rather than import-linter: docs/decisions/research-layer.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
LIBRARY, LAB = "seqrec", "seqrec_lab"

# Cycles another change removes; each must go from here once it is gone (the test says so).
KNOWN_CYCLES: set[frozenset[str]] = set()


def modules(src: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``src`` (a package is its
    ``__init__``)."""
    out = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name ``module`` imports anywhere in its file: ``import a.b`` gives ``a.b``,
    ``from a import b`` gives ``a.b`` (a module or a name in ``a``), relative imports resolved;
    ``importlib.import_module("a.b")`` / ``__import__("a.b")`` with a literal name count too."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            names |= {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return names


def import_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``src`` it imports (a name that is not a module stands for the
    closest enclosing module: ``from a.b import f`` -> ``a.b``)."""
    mods = modules(src)
    graph: dict[str, set[str]] = {}
    for module, path in mods.items():
        targets = set()
        for name in imported_names(module, path):
            while name and name not in mods:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def library_imports_of_the_lab(src: Path) -> list[str]:
    """``module -> name`` for every import of the research layer by a library module."""
    bad = []
    for module, path in modules(src).items():
        if module.split(".")[0] != LIBRARY:
            continue
        for name in sorted(imported_names(module, path)):
            if name.split(".")[0] == LAB:
                bad.append(f"{module} -> {name}")
    return bad


def test_both_layers_are_where_the_contract_looks():
    mods = modules(SRC)
    assert (
        LIBRARY in mods
        and LAB in mods
        and f"{LAB}.harness" in mods
        and f"{LIBRARY}.cli.main" in mods
    )


def test_the_library_never_imports_the_research_layer():
    assert library_imports_of_the_lab(SRC) == []


def test_the_research_layer_builds_on_the_library():
    graph = import_graph(SRC)
    assert any(t.split(".")[0] == LIBRARY for t in graph[f"{LAB}.runner"])


def test_no_import_cycles_in_src():
    found = set(cycles(import_graph(SRC)))
    new = sorted(sorted(c) for c in found - KNOWN_CYCLES)
    assert new == [], f"import cycles (function-local imports count): {new}"
    gone = sorted(sorted(c) for c in KNOWN_CYCLES - found)
    assert gone == [], f"these cycles are gone: delete them from KNOWN_CYCLES: {gone}"


# --- the checks can fail ----------------------------------------------------------------------
def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_function_local_import_of_the_lab_is_caught(tmp_path):
    src = _tree(
        tmp_path,
        {
            "seqrec/__init__.py": "",
            "seqrec/cli/__init__.py": "",
            "seqrec/cli/main.py": "def run():\n    from seqrec_lab.cli import COMMAND\n    return COMMAND\n",
            "seqrec/other.py": "import importlib\nm = importlib.import_module('seqrec_lab')\n",
            "seqrec_lab/__init__.py": "import seqrec\n",
            "seqrec_lab/cli.py": "from seqrec.cli import main\nCOMMAND = main\n",
        },
    )
    assert library_imports_of_the_lab(src) == [
        "seqrec.cli.main -> seqrec_lab.cli.COMMAND",
        "seqrec.other -> seqrec_lab",
    ]


@pytest.mark.parametrize("local", [True, False])
def test_a_cycle_is_caught_even_behind_function_local_imports(tmp_path, local):
    back = "def f():\n    from . import a\n" if local else "from seqrec.pkg import a\n"
    src = _tree(
        tmp_path,
        {
            "seqrec/__init__.py": "",
            "seqrec/pkg/__init__.py": "",
            "seqrec/pkg/a.py": "from seqrec.pkg.b import g\n",
            "seqrec/pkg/b.py": "import seqrec.pkg.c\ng = 1\n",
            "seqrec/pkg/c.py": back,
            "seqrec/pkg/d.py": "from seqrec.pkg import a, b, c\n",  # imports all three: no cycle
        },
    )
    assert cycles(import_graph(src)) == [
        frozenset({"seqrec.pkg.a", "seqrec.pkg.b", "seqrec.pkg.c"})
    ]
