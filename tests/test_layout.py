"""The package layout keeps its promises: no public name shadows a module, no path outside the repository."""

import ast
import importlib
import pathlib
import pkgutil
import re
import types

import tallmcmc

PACKAGE_ROOT = pathlib.Path(tallmcmc.__file__).parent


def all_modules():
    yield tallmcmc
    for info in pkgutil.walk_packages(tallmcmc.__path__, prefix="tallmcmc."):
        if info.name.endswith("__main__"):
            continue
        yield importlib.import_module(info.name)


def test_no_public_name_shadows_a_module():
    """``import tallmcmc.x.y as m`` must give the module y, and dotted-path patching must reach it."""
    shadowed = []
    for module in all_modules():
        if not hasattr(module, "__path__"):
            continue
        for info in pkgutil.iter_modules(module.__path__):
            value = getattr(module, info.name, None)
            if value is not None and not isinstance(value, types.ModuleType):
                shadowed.append(f"{module.__name__}.{info.name}")
        for name in getattr(module, "__all__", []):
            if name in {info.name for info in pkgutil.iter_modules(module.__path__)}:
                assert isinstance(getattr(module, name), types.ModuleType), name
    assert not shadowed, f"public names shadowing modules: {shadowed}"


def test_every_public_name_in_all_exists():
    for module in all_modules():
        for name in getattr(module, "__all__", []):
            assert hasattr(module, name), f"{module.__name__}.__all__ lists {name!r}, which does not exist"


def test_no_source_file_points_outside_the_repository():
    pattern = re.compile(r"(/work/|/home/|/tmp/|\.\./shared|shared/papers)")
    offenders = [
        f"{path.relative_to(PACKAGE_ROOT)}:{number}"
        for path in PACKAGE_ROOT.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, offenders


# ------------------------------------------------------------------------------------------ the import graph

#: Modules that may use the examples: the reproductions, the command line, the examples themselves.
NOT_CORE = ("tallmcmc.examples", "tallmcmc.reproduce", "tallmcmc.cli", "tallmcmc.__main__")


def module_names() -> dict[str, pathlib.Path]:
    names = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imported_modules(node, module: str, known: dict[str, pathlib.Path]) -> list[str]:
    """The package's modules an ``import``/``from … import`` statement names (a submodule imported by name too)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if node.level:  # relative: resolve against the importing module's package
        base = module.split(".")
        package = base if module in known and known[module].name == "__init__.py" else base[:-1]
        target = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    found = [target] if target in known else []
    found += [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known]
    return found


def import_graph() -> dict[str, set[str]]:
    """Imports between the package's modules, at any level (a lazy import inside a function is still a dependency),
    with the parent packages a target's import runs (those that are not the importer's own ancestors, which are
    running already)."""
    known = module_names()
    graph = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges = set()
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in imported_modules(node, module, known):
                parts = target.split(".")
                for depth in range(1, len(parts) + 1):
                    parent = ".".join(parts[:depth])
                    own_ancestor = module == parent or module.startswith(parent + ".")
                    if parent in known and not own_ancestor:
                        edges.add(parent)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a cycle of imports."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_inside_the_package():
    found = cycles(import_graph())
    assert not found, f"modules that import each other: {found}"


def test_the_cycle_check_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_core_modules_import_no_example():
    """Nothing outside the examples, the reproductions and the command line imports an example, at any level."""
    offenders = []
    for module, path in module_names().items():
        if module.startswith(NOT_CORE):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(name.startswith("tallmcmc.examples") for name in names):
                    offenders.append(f"{module}:{node.lineno}")
    assert not offenders, f"core modules importing an example: {offenders}"


def test_import_tallmcmc_leaves_the_stein_subpackage_until_it_is_used():
    """``import tallmcmc`` does not import numba (0.4 s with scipy.spatial, for tallmcmc.stein only); the first
    ``tallmcmc.stein`` imports it, and an unknown name is still an AttributeError."""
    import subprocess
    import sys

    code = (
        "import sys, tallmcmc; before = 'numba' in sys.modules; name = tallmcmc.stein.graph_stein_discrepancy.__name__; "
        "missing = not hasattr(tallmcmc, 'no_such_name'); print(before, name, 'numba' in sys.modules, missing)"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.split() == ["False", "graph_stein_discrepancy", "True", "True"]


def test_import_tallmcmc_leaves_scipy_stats_optimize_and_special_until_they_are_used():
    """``import tallmcmc`` does not import ``scipy.stats``, ``scipy.optimize`` or ``scipy.special`` (0.6–0.9 s of it on
    a slow CPU for the first two, 0.06–0.1 s more for the third; ``docs/compilation.md``, "The import"): the functions
    that use them import them on first use (the austere design, ``fast_setup``'s subsample phase, ``find_mode``'s scipy
    methods and trust region, checking and solving a correction)."""
    import subprocess
    import sys

    code = "import sys, tallmcmc; print(*(f'scipy.{name}' in sys.modules for name in ('stats', 'optimize', 'special')))"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.split() == ["False", "False", "False"]
