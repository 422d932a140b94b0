"""The package's imports form no cycle (settings, clients, pipeline; hf and embedded).

Every import counts: module level, inside functions and under TYPE_CHECKING, since a lazy import
only hides a circle. The package's own ``__init__`` (the public facade) is left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "blackbox_wd"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """blackbox_wd modules (and names that may be modules) imported anywhere in a file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("blackbox_wd"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("blackbox_wd"))
    return out


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py"}
    edges = {}
    for name, path in modules.items():
        deps = {d for d in imports(path) if d in modules and d != name}
        # importing a.b.c runs a/__init__ and a/b/__init__ first (a package importing its own
        # submodules is the usual layout, so a module's own ancestors are left out)
        parents = {".".join(d.split(".")[:i]) for d in deps for i in range(2, d.count(".") + 1)}
        own = {".".join(name.split(".")[:i]) for i in range(2, name.count(".") + 1)}
        edges[name] = (deps | (parents & modules.keys())) - own - {name}
    return edges


def test_no_import_cycles():
    edges, cycles = graph(), []
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_settings_and_teachers_stand_alone():
    edges = graph()

    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for dep in edges[todo.pop()]:
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return seen

    assert not reach("blackbox_wd.settings") & {"blackbox_wd.run.detector", "blackbox_wd.clients"}
    assert "blackbox_wd.teachers.hf" not in reach("blackbox_wd.teachers.embedded")
