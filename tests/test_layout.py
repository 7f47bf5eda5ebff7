"""The package layout keeps its promises: no public name shadows a module, no path outside the repository."""

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
