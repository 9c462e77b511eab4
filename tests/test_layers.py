"""The arrows between the packages run one way (docs/adr/0004-one-way-layers.md), the modules inside an app import
each other without a circle (docs/adr/0027-one-way-inside-an-app.md), and the agent stays free of the dashboard.
Imports inside functions count; migrations do not."""

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Lowest first. An app may import the apps of lower levels only; apps on one level do not import each other.
# common is no app: what several layers need (the database retry, the broker, queueing a task by name).
LEVELS = (("common",), ("accounts",), ("nodes",), ("remote",), ("validation",), ("drift", "playbooks", "network"),
          ("hooks",), ("health",), ("fleet",), ("api",))
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


def _module_arrows():
    """{module: the modules of cudaweb it imports, anywhere in it}, each named by its dotted path."""
    modules = {}
    for path in _sources(REPO / "cudaweb"):
        parts = path.relative_to(REPO).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return {name: {other for other in _imports(path) if other in modules and other != name}
            for name, path in modules.items()}


def _circles(arrows):
    """The sets of two or more nodes that reach each other (strongly connected components), each sorted."""
    order, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(start):  # Tarjan's algorithm, iterative: no recursion limit to meet
        work = [(start, iter(sorted(arrows.get(start, ()))))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in order:
                    order[target] = low[target] = len(order)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(arrows.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], order[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == order[node]:
                    circle = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        circle.append(member)
                        if member == node:
                            break
                    if len(circle) > 1:
                        circles.append(sorted(circle))

    for node in sorted(arrows):
        if node not in order:
            visit(node)
    return sorted(circles)


def test_the_circle_finder_finds_circles():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_inside_an_app():
    """Tasks -> services -> queue and models, never back: a service queues a task by its registered name."""
    arrows = _module_arrows()
    assert len(arrows) > 100 and "cudaweb.validation.services" in arrows["cudaweb.validation.tasks"]
    circles = ["{%s}" % ", ".join(circle) for circle in _circles(arrows)]  # each reaches every other of its set
    assert circles == [], "import circles:\n" + "\n".join(circles)


def test_no_module_imports_a_tasks_module():
    """The tasks are the top floor of their app: Celery finds them, services queue them by name (common.dispatch)."""
    arrows = _module_arrows()
    importers = sorted("%s -> %s" % (name, other) for name, others in arrows.items() for other in others
                       if other.endswith(".tasks") and not name.endswith(".tasks"))
    assert importers == []


def test_every_task_queued_by_name_is_registered():
    """A name a module hands to common.dispatch (a module constant ending in a task's name) is a registered task."""
    from cudaweb.celery import app

    app.autodiscover_tasks(force=True)
    named = set()
    for path in _sources(REPO / "cudaweb"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cudaweb.") \
                    and ".tasks." in node.value and " " not in node.value:
                named.add(node.value)
    assert len(named) >= 6
    assert sorted(named - set(app.tasks)) == []


def test_no_import_circle_between_apps():
    _, arrows = _app_arrows()
    graph = {}
    for a, b in arrows:
        graph.setdefault(a, set()).add(b)
    assert _circles(graph) == []


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
