"""The catalogue of checks: each layer module registers its checks here, in run order."""

CHECKS = []
MODES = ("quick", "standard", "full")


class CheckSpec:
    __slots__ = ("id", "layer", "title", "func", "requires", "modes", "budget_s")

    def __init__(self, id, layer, title, func, requires, modes, budget_s):
        self.id = id
        self.layer = layer
        self.title = title
        self.func = func
        self.requires = tuple(requires)
        self.modes = tuple(modes)
        self.budget_s = budget_s


def check(id, layer, title, requires=(), modes=MODES, budget_s=30):
    """Register a check function `func(ctx) -> Outcome`; `budget_s` bounds its child processes."""

    def register(func):
        CHECKS.append(CheckSpec(id, layer, title, func, requires, modes, budget_s))
        return func

    return register


def load_all():
    """Import the layer modules (their decorators fill CHECKS) and return the catalogue."""
    from agents.cudaprobe.layers import (  # noqa: F401  (imported for registration)
        host, driver, torch_build, runtime, context, comm, training, advisories,
    )

    return list(CHECKS)
