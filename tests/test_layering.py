"""`extensions` and `clients` never import Django, and imports point one way (STYLE.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_IMPORT_ALL = """
import importlib, pkgutil, sys
sys.modules["django"] = None  # any `import django...` now raises ImportError
import extensions, clients
names = []
for package in (extensions, clients):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
        names.append(info.name)
leaked = sorted(m for m in sys.modules if m == "rest_framework" or m.startswith(("django.", "rest_framework.")))
assert not leaked, leaked
print(len(names))
"""


def test_extensions_and_clients_import_with_django_absent() -> None:
    proc = subprocess.run([sys.executable, "-c", _IMPORT_ALL], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.strip()) >= 6  # every module was really imported


def _imports(package: str, *, full: bool = False) -> set[tuple[str, str]]:
    """(file, imported module) for every absolute import of a package: the top-level package, or
    with ``full`` the whole dotted name (and for ``from M import N`` also ``M.N``)."""
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        if "migrations" in path.parts:
            continue
        where = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update((where, alias.name if full else alias.name.split(".")[0]) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add((where, node.module if full else node.module.split(".")[0]))
                if full:
                    found.update((where, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def test_imports_point_one_way() -> None:
    forbidden = {
        "extensions": {"django", "rest_framework", "registry", "builds", "clients", "celery"},
        "clients": {"django", "rest_framework", "registry", "builds", "celery"},
        "registry": {"builds", "clients"},
    }
    offences = []
    for package, banned in forbidden.items():
        for path, module in _imports(package):
            if module in banned and path != "registry/urls.py":  # the composition root
                offences.append(f"{path} imports {module}")
    assert offences == []


def test_only_views_and_the_url_root_import_the_api_views() -> None:
    # HTTP -> view -> service: services, selectors, models and tasks never reach back into registry.apis.
    allowed = (
        "registry/apis/",
        "registry/urls.py",
        "registry/views.py",
        "registry/account_views.py",
        "registry/owner_views.py",
        "builds/apis.py",
        "builds/web_views.py",
    )
    offences = sorted(
        f"{path} imports {module}"
        for package in ("registry", "builds")
        for path, module in _imports(package, full=True)
        if (module == "registry.apis" or module.startswith("registry.apis.")) and not path.startswith(allowed)
    )
    assert offences == []


def test_the_runtime_loader_modules_import_the_manager_last() -> None:
    # clients.runtime's parts point one way: errors, loaded, arguments, policy, discovery, state,
    # then the manager that composes them; none of them imports the package itself.
    order = ["errors", "loaded", "arguments", "policy", "discovery", "state", "manager"]
    offences = []
    for path, module in _imports("clients", full=True):
        if not path.startswith("clients/runtime/") or path.endswith("__init__.py"):
            continue
        part = Path(path).stem
        if module == "clients.runtime":
            offences.append(f"{path} imports the package clients.runtime")
        elif module.startswith("clients.runtime."):
            other = module.split(".")[2]
            if other in order and order.index(other) >= order.index(part):
                offences.append(f"{path} imports {module}")
    assert offences == []
