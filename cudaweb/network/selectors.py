"""Reads of network tests: a test with its pairs and all-reduces as the API and `manage.py test_network` show it."""


def network_test_export(test):
    """A test, its pairs and its all-reduces as plain data."""
    pairs = test.pairs.select_related("node_a", "node_b").only(
        "round", "status", "failure", "reason", "gloo_latency_us", "gloo_busbw_gbs", "nccl_busbw_gbs", "transport",
        "duration_s", "test_id", "node_a__name", "node_b__name")
    return {"id": test.id, "status": test.status, "plan": test.plan, "created": test.created,
            "finished": test.finished, "summary": test.summary, "suspects": test.suspects or [],
            "nodes": list(test.nodes.order_by("name").values_list("name", flat=True)),
            "pairs": [{"round": p.round, "node_a": p.node_a.name, "node_b": p.node_b.name, "status": p.status,
                       "failure": p.failure, "reason": p.reason, "gloo_latency_us": p.gloo_latency_us,
                       "gloo_busbw_gbs": p.gloo_busbw_gbs, "nccl_busbw_gbs": p.nccl_busbw_gbs,
                       "transport": p.transport, "duration_s": p.duration_s} for p in pairs],
            "collectives": [{"round": c.round, "members": c.members, "role": c.role, "status": c.status,
                             "failure": c.failure, "reason": c.reason, "backend": c.backend, "busbw_gbs": c.busbw_gbs,
                             "latency_us": c.latency_us, "expected_gbs": c.expected_gbs, "duration_s": c.duration_s}
                            for c in test.collectives.all()]}
