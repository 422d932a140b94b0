"""The package's layout: its imports form no cycle and run downward, its stack of imports stays shallow, it keeps
few modules of its own beside its folders, and no module grows long.

Every import counts for the cycles and the floors: module level, inside functions and under TYPE_CHECKING, since a
lazy import only hides a circle. The depth counts what an import runs: module-level imports, not those under
TYPE_CHECKING. The package's own ``__init__`` (the public facade) is left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "blackbox_wd"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_nodes(tree: ast.Module) -> list[ast.stmt]:
    """The imports a module runs when it is imported: module level, not under TYPE_CHECKING nor in a function."""
    out: list[ast.stmt] = []

    def walk(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                out.append(node)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                    walk(block)
            elif isinstance(node, ast.ClassDef):
                walk(node.body)

    walk(tree.body)
    return out


def imports(path: Path, runtime: bool = False) -> set[str]:
    """blackbox_wd modules (and names that may be modules) imported anywhere in a file (``runtime``: on import)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in runtime_nodes(tree) if runtime else ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("blackbox_wd"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("blackbox_wd"))
    return out


def graph(runtime: bool = False) -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py"}
    edges = {}
    for name, path in modules.items():
        deps = {d for d in imports(path, runtime) if d in modules and d != name}
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


# The floors, from the bottom up: a module imports from its own folder (or module) and from the floors below it,
# never from its own floor's other folders nor from a floor above. The bottom floor's plain modules are shared by
# every floor and may import one another.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors", "checks", "records", "paths", "cpus", "adaptive", "scored_row"),  # plain data and rules
    ("teachers", "measure"),  # the teacher pass; W2 distances to scores
    ("settings",),  # its defaults are the teachers' and the measure's
    ("clients",),  # the samplers
    ("signals",),  # baselines, answers, claims
    ("calibration",),  # scores to a probability and a flag
    ("run",),  # the wiring and the stages
    ("doors",),  # the commands
    ("__main__",),
)
MAX_OWN_MODULES = 8  # blackbox_wd's own modules beside its folders, __init__ and __main__ aside
MAX_DEPTH = 11  # imports in the longest chain that importing a module runs (a door down to calibration.fileformat)
MAX_LINES = 600


def floor_of(module: str) -> tuple[int, str]:
    unit = module.split(".")[1]
    return next(i for i, units in enumerate(FLOORS) if unit in units), unit


def test_every_folder_and_module_has_a_floor():
    own = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    folders = {d.name for d in PACKAGE.iterdir() if (d / "__init__.py").exists()}
    assert own | folders == {unit for units in FLOORS for unit in units}


def test_few_modules_of_its_own():
    own = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(own) <= MAX_OWN_MODULES, own


def test_imports_run_downward():
    upward = []
    for module, deps in graph().items():
        (floor, unit) = floor_of(module)
        for dep in deps:
            (dep_floor, dep_unit) = floor_of(dep)
            if dep_unit != unit and (dep_floor > floor or (dep_floor == floor and floor > 0)):
                upward.append(f"{module} -> {dep}")
    assert sorted(upward) == []


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    memo: dict[str, list[str]] = {}

    def chain(node: str) -> list[str]:
        if node not in memo:
            memo[node] = [node]  # a cycle (test_no_import_cycles) ends here
            memo[node] = [node, *max((chain(dep) for dep in edges[node]), key=len, default=[])]
        return memo[node]

    return max((chain(node) for node in edges), key=len)


def test_import_stack_is_shallow():
    chain = longest_chain(graph(runtime=True))
    assert len(chain) - 1 <= MAX_DEPTH, " -> ".join(chain)


def test_longest_chain_counts_imports():
    assert longest_chain({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}}) == ["a", "b", "c"]


def test_no_module_is_long():
    lengths = {
        str(p.relative_to(PACKAGE.parent)): len(p.read_text().splitlines()) for p in sorted(PACKAGE.rglob("*.py"))
    }
    long = {name for name, n in lengths.items() if n > MAX_LINES}
    assert long == set(), {name: lengths[name] for name in long}


MAX_MODEL_LINES = 400  # calibration/model.py applies a calibration; its file, formats 1 and 2, is fileformat.py's


def test_the_calibration_model_keeps_to_applying():
    lines = len((PACKAGE / "calibration" / "model.py").read_text().splitlines())
    assert lines <= MAX_MODEL_LINES, lines


# imports inside functions, package-wide: each keeps a heavy library off `bbwd --help`, or off a run that does
# not use it (POT, with the scikit-learn it imports, where a simplex runs; the OpenAI client for a local target;
# each local sampler's library where the other draws; transformers' model code, with torch, where a teacher's weights
# load in torch, and numpy's teacher where they load in numpy; torch's GPU query where a GPU driver is there)
MAX_INNER_IMPORTS = 19
MAX_PARAMETERS = 8  # of a function; at most MAX_WIDE functions outside the CLI commands take more
MAX_WIDE = 3


def functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_few_imports_inside_functions():
    inner = [
        f"{path.relative_to(PACKAGE.parent)}:{sub.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for function in functions(ast.parse(path.read_text()))
        for statement in function.body
        for sub in ast.walk(statement)
        if isinstance(sub, (ast.Import, ast.ImportFrom))
    ]
    assert len(set(inner)) <= MAX_INNER_IMPORTS, inner


def test_few_functions_take_many_parameters():
    def width(f: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
        a = f.args
        names = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
        return sum(n.arg not in ("self", "cls") for n in names)

    wide = [
        f"{path.relative_to(PACKAGE.parent)}:{f.name} ({width(f)})"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "cli" not in path.parts  # the commands: one parameter per option
        for f in functions(ast.parse(path.read_text()))
        if width(f) > MAX_PARAMETERS
    ]
    assert len(wide) <= MAX_WIDE, wide


def top_level_names() -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, set[str]], list[str]]:
    """Each class, public function and constant defined at a module's top level, with the modules defining it; and
    each public parameter of a public function or method annotated with ``Any``."""
    classes: dict[str, set[str]] = {}
    functions: dict[str, set[str]] = {}
    constants: dict[str, set[str]] = {}
    typed_any: list[str] = []

    def any_params(fn: ast.FunctionDef | ast.AsyncFunctionDef, where: str) -> None:
        for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
            if a.annotation is not None and "Any" in ast.unparse(a.annotation):
                typed_any.append(f"{where}({a.arg})")

    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, set()).add(name)
                for m in node.body:
                    public = not (m.name.startswith("_") or node.name.startswith("_")) if hasattr(m, "name") else False
                    if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) and public:
                        any_params(m, f"{name}.{node.name}.{m.name}")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                functions.setdefault(node.name, set()).add(name)
                any_params(node, f"{name}.{node.name}")
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name) and target.id.isupper():
                        constants.setdefault(target.id, set()).add(name)
    return classes, functions, constants, typed_any


def test_one_meaning_per_name_and_few_parameters_typed_any():
    """No class name is defined in two modules, at most two public function names and two constant names are, and at
    most 40 public parameters are typed ``Any``."""
    classes, functions, constants, typed_any = top_level_names()
    twice = {
        kind: {n: sorted(m) for n, m in names.items() if len(m) > 1}
        for kind, names in (("classes", classes), ("functions", functions), ("constants", constants))
    }
    assert twice["classes"] == {}, twice
    assert len(twice["functions"]) <= 2 and len(twice["constants"]) <= 2, twice
    assert len(typed_any) <= 40, typed_any


def test_the_tests_mirror_the_packages_folders():
    """tests/ has a folder for each of the package's folders (its own modules' tests stay at the top)."""
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    tests = {p.name for p in Path(__file__).parent.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert len(folders) == 7 and folders <= tests, (folders, tests)
