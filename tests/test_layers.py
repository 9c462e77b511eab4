"""The arrows between the packages run one way (docs/adr/0004-one-way-layers.md), and the agent stays free of the
dashboard. Imports inside functions count; migrations do not."""

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Lowest first. An app may import the apps of lower levels only; apps on one level do not import each other.
LEVELS = (("accounts",), ("nodes",), ("remote",), ("validation",), ("drift", "playbooks", "network"), ("hooks",),
          ("health",), ("fleet", "api"))
AGENT_MAY_IMPORT = {"agents", "torch", "pynvml"}


def _imports(path):
    """Absolute names of the modules a file imports, anywhere in it (relative imports resolved)."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            names += [base] + ["%s.%s" % (base, alias.name) for alias in node.names]
    return names


def _sources(directory):
    return [p for p in sorted(directory.rglob("*.py")) if "migrations" not in p.parts]


def _app_arrows():
    apps = {p.parent.name for p in (REPO / "cudaweb").glob("*/__init__.py")}
    arrows = {}
    for app in sorted(apps):
        for path in _sources(REPO / "cudaweb" / app):
            for name in _imports(path):
                parts = name.split(".")
                if parts[0] == "cudaweb" and len(parts) > 1 and parts[1] in apps and parts[1] != app:
                    arrows.setdefault((app, parts[1]), path.relative_to(REPO))
    return apps, arrows


def test_every_app_has_a_level():
    apps, _ = _app_arrows()
    assert apps == {app for level in LEVELS for app in level}


def test_apps_import_only_apps_below_them():
    level_of = {app: i for i, level in enumerate(LEVELS) for app in level}
    _, arrows = _app_arrows()
    upward = ["%s -> %s (%s)" % (a, b, where) for (a, b), where in sorted(arrows.items()) if level_of[b] >= level_of[a]]
    assert upward == []
    assert ("fleet", "validation") in arrows and ("validation", "nodes") in arrows  # the check sees real arrows


def test_the_transports_are_plain_python():
    for path in _sources(REPO / "cudaweb" / "remote" / "transports"):
        assert not [n for n in _imports(path) if n.split(".")[0] in ("django", "cudaweb")
                    and not n.startswith("cudaweb.remote.transports")], path


def test_the_agent_needs_only_the_standard_library_torch_and_pynvml():
    foreign = {}
    for path in _sources(REPO / "agents"):
        for name in _imports(path):
            top = name.split(".")[0]
            if top and top not in sys.stdlib_module_names and top not in AGENT_MAY_IMPORT:
                foreign.setdefault(top, str(path.relative_to(REPO)))
    assert foreign == {}
