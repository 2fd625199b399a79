"""The house's layers (docs/ARCHITECTURE.md, "Layers"): every import of the package, lazy ones included, goes from a
room to a room of a lower layer, and no two modules import each other in a loop. A new import that breaks this needs
a change of the table below and of the document, not an exception."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dpd_desktop"

#: bottom first; a room is a top-level module or sub-package of dpd_desktop (docs/ARCHITECTURE.md)
LAYERS: list[set[str]] = [
    {"atomic", "families", "process", "timing"},
    {"config"},
    {"kernels", "metrics"},
    {"data", "models"},
    {"quant", "runs"},
    {"analysis", "training"},
    {"export", "instruments", "lab"},
    {"loop", "sweep"},
    {"arena", "gui"},
    {"selftest"},
    {"cli"},
    {"__main__"},
]
RANK = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_of(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path, known: dict[str, Path], source: str | None = None) -> set[str]:
    """The package's modules that ``path`` (or ``source`` standing at ``path``) imports; an imported name that is a
    module counts as that module."""
    mod = _module_of(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8") if source is None else source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            targets = subs if len(subs) == len(node.names) else [target, *subs]
        else:
            continue
        out.update(t for t in targets if t in known)
    out.discard(mod)
    return out


def _room(module: str) -> str:
    return module.split(".")[1]


def test_every_room_is_in_one_layer():
    rooms = {_room(m) for m in _modules() if m != "dpd_desktop"}
    assert rooms == set(RANK), (sorted(rooms - set(RANK)), sorted(set(RANK) - rooms))


def test_every_import_goes_down_a_layer():
    known = _modules()
    wrong = sorted(f"{m} -> {t}" for m, p in known.items() if m != "dpd_desktop"
                   for t in _imports(p, known)
                   if t != "dpd_desktop" and _room(t) != _room(m) and RANK[_room(t)] >= RANK[_room(m)])
    assert wrong == []


def test_no_modules_import_each_other_in_a_loop():
    known = _modules()
    faces = {m for m, p in known.items() if p.name == "__init__.py"}  # a package's face only hands names on
    graph = {m: {t for t in _imports(p, known) if t not in faces} for m, p in known.items()}
    state: dict[str, int] = {}
    loops = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                loops.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert loops == []


def test_the_reader_sees_lazy_and_relative_imports():
    """A function-level import and ``from . import module`` are read as what they import (the kind a layer check
    must not miss)."""
    known = _modules()
    source = "def f():\n    from .gui import app\n    from .runs import record as r\n"
    seen = _imports(PACKAGE / "config.py", known, source)
    assert seen == {"dpd_desktop.gui.app", "dpd_desktop.runs.record"}
    assert all(RANK[_room(t)] > RANK["config"] for t in seen)  # so test_every_import_goes_down_a_layer would fail
