"""What a watch finding means to the loop, by the agent's stable signatures: hardware (moves the node), application
(recorded, never quarantines a node by itself) or an observation (recorded only).

Hardware signatures are the ones NVIDIA's Xid catalogue and the NVML / fabric documentation name as a fault of the
GPU, its memory, its links or its fabric; everything a workload or a setting can cause is not here."""

APPLICATION = frozenset({"xid_application"})
HARDWARE = frozenset({
    "xid_critical", "gpu_fallen_off_bus",
    "ecc_uncorrected", "row_remap_failure", "row_remap_pending", "retired_pages_pending", "row_remap_uncorrectable",
    "nvlink_link_down", "nvlink_errors_growing",
    "sxid_fatal", "fabric_registration_failed", "fabric_in_progress", "fabric_manager_not_running",
    "pcie_aer_fatal", "pcie_aer_errors_growing", "pcie_link_degraded",
    "ib_errors_growing", "ib_port_down",
    "driver_unreachable", "no_gpus_found", "nvml_hang", "nvidia_smi_hang",
})
# A condition is read afresh at every look (a state, not a log line): one that is gone at the next look clears a
# suspect node. An occurrence (an Xid line, a counter that grew) is not seen twice, so it never clears by itself.
CONDITIONS = frozenset({"nvlink_link_down", "fabric_in_progress", "fabric_manager_not_running", "driver_unreachable",
                        "nvml_hang", "nvidia_smi_hang", "ib_port_down", "row_remap_pending",
                        "retired_pages_pending"})
# Which hardware signature names a node's root cause when one look shows several: the first of these wins.
PRIORITY = ("gpu_fallen_off_bus", "xid_critical", "row_remap_failure", "ecc_uncorrected", "row_remap_uncorrectable",
            "row_remap_pending", "retired_pages_pending", "sxid_fatal", "fabric_registration_failed",
            "fabric_in_progress", "fabric_manager_not_running", "nvlink_link_down", "nvlink_errors_growing",
            "pcie_aer_fatal", "pcie_aer_errors_growing", "pcie_link_degraded", "ib_port_down", "ib_errors_growing",
            "driver_unreachable", "no_gpus_found", "nvml_hang", "nvidia_smi_hang")

HARDWARE_CLASS, APPLICATION_CLASS, OBSERVATION_CLASS = "hardware", "application", "observation"


def event_class(signature):
    if signature in HARDWARE:
        return HARDWARE_CLASS
    if signature in APPLICATION:
        return APPLICATION_CLASS
    return OBSERVATION_CLASS


def root_cause(signatures):
    """The hardware signature that names the fault among `signatures`, or "" when none is hardware."""
    found = [s for s in signatures if s in HARDWARE]
    if not found:
        return ""
    return min(found, key=lambda s: PRIORITY.index(s) if s in PRIORITY else len(PRIORITY))
