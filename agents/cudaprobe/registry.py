"""The catalogue of checks and GPU tasks, gathered from the modules of agents.cudaprobe.checks.

A check module declares its checks with @check (judged in the agent) and the work they send to GPU workers with
@gpu_task (run in a worker process, see worker.py). load_all imports every module of the package, so adding a
check touches one module.
"""

import importlib
import pkgutil

from agents.cudaprobe.model import LAYERS

CHECKS = []
MODES = ("quick", "standard", "full", "burnin")  # a check runs in these unless it says otherwise
WATCH = "watch"  # the light watch between validations (issue 30): L0-L1 and the fabric, no torch; checks opt in
ALL_MODES = MODES + (WATCH,)
IN_WATCH_TOO = ALL_MODES  # modes= of a check that the watch runs as well
CHECKS_PACKAGE = "agents.cudaprobe.checks"


class CheckSpec:
    __slots__ = ("id", "layer", "title", "func", "requires", "modes", "budget_s", "order")

    def __init__(self, id, layer, title, func, requires, modes, budget_s, order):
        self.id = id
        self.layer = layer
        self.title = title
        self.func = func
        self.requires = tuple(requires)
        self.modes = tuple(modes)
        self.budget_s = budget_s
        self.order = order  # declaration order, which the report keeps within a layer


def check(id, layer, title, requires=(), modes=MODES, budget_s=30):
    """Register a check function `func(ctx) -> Outcome`; `budget_s` bounds its child processes."""
    if layer not in LAYERS:
        raise ValueError("check %s: unknown layer %r" % (id, layer))

    def register(func):
        group = func.__module__.rpartition(".")[2]
        if func.__module__.startswith(CHECKS_PACKAGE + ".") and id.split(".")[0] != group:
            raise ValueError("check %s is declared in module %s: ids start with their module's name" % (id, group))
        CHECKS.append(CheckSpec(id, layer, title, func, requires, modes, budget_s, len(CHECKS)))
        return func

    return register


def gpu_task(func):
    """Mark `func(args) -> dict` as work a GPU worker may run (it runs there, never in the agent itself)."""
    func.gpu_task = True
    return func


def task_name(func):
    """The name a worker resolves back to `func`: "<module>:<function>"."""
    if not getattr(func, "gpu_task", False):
        raise ValueError("%s is not a @gpu_task" % func.__name__)
    return "%s:%s" % (func.__module__, func.__name__)


def resolve_task(name):
    """The @gpu_task function a worker was asked to run; LookupError for anything else."""
    module_name, _, func_name = str(name).partition(":")
    if not module_name.startswith(CHECKS_PACKAGE + "."):
        raise LookupError("no GPU task %r" % name)
    func = getattr(importlib.import_module(module_name), func_name, None)
    if not getattr(func, "gpu_task", False):
        raise LookupError("no GPU task %r" % name)
    return func


def _run_order(specs):
    """Layer then declaration order, except that a check runs after the checks it requires."""
    pending = sorted(specs, key=lambda s: (LAYERS.index(s.layer), s.order))
    known = {s.id for s in specs}
    done, ordered = set(), []
    while pending:
        ready = next((s for s in pending if all(r in done or r not in known for r in s.requires)), None)
        if ready is None:
            raise ValueError("checks require each other in a circle: %s" % ", ".join(s.id for s in pending))
        pending.remove(ready)
        done.add(ready.id)
        ordered.append(ready)
    return ordered


def load_all():
    """Import every check module (their decorators fill CHECKS) and return the catalogue in run order."""
    package = importlib.import_module(CHECKS_PACKAGE)
    for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not module.name.startswith("_"):
            importlib.import_module("%s.%s" % (CHECKS_PACKAGE, module.name))
    return _run_order(CHECKS)
