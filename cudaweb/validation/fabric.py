"""What a run tells its agent about the node's fabric: the previous run's error counters (so growth since then
warns) and the InfiniBand rate the node should reach (a node's or its labels' FabricExpectation)."""

import json

from cudaweb.nodes.models import FabricExpectation
from cudaweb.validation.models import CheckResult

RAN = ("pass", "warn", "fail")


def fabric_previous(*, run):
    """{check id: {metric: value}} of the fabric checks that ran in `run`: the per-link and per-port counters
    (their keys hold a '.'), zeros left out (the agent reads an absent counter as 0)."""
    found = {}
    for check_id, metrics in CheckResult.objects.filter(run=run, check_id__startswith="fabric.",
                                                        status__in=RAN).values_list("check_id", "metrics"):
        found[check_id] = {key: value for key, value in (metrics or {}).items()
                           if "." in key and isinstance(value, (int, float)) and value}
    return found


def fabric_agent_args(*, node, previous):
    """--fabric-previous and --ib-rate for the agent's command line (none where there is nothing to pass)."""
    args = []
    if previous is not None:
        counters = fabric_previous(run=previous)
        if counters:
            args += ["--fabric-previous", json.dumps(counters, sort_keys=True, separators=(",", ":"))]
    rate = FabricExpectation.ib_rate_for(node)
    if rate:
        args += ["--ib-rate", str(rate)]
    return args
