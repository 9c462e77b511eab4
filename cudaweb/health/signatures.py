"""What a watch finding means to the loop, by the agent's stable signatures: hardware (moves the node), application
(recorded, never quarantines a node by itself) or an observation (recorded only).

Hardware signatures are the ones NVIDIA's Xid catalogue and the NVML / fabric documentation name as a fault of the
GPU, its memory, its links or its fabric; everything a workload or a setting can cause is not here. Every signature
the agent's watch checks can give is one of the three on purpose (tests/health/test_signatures.py): an observation is
listed in OBSERVATIONS with why, so that a new signature cannot become one by being forgotten."""

APPLICATION = frozenset({"xid_application"})
HARDWARE = frozenset({
    "xid_critical", "gpu_fallen_off_bus", "gpu_lost",
    "ecc_uncorrected", "row_remap_failure", "row_remap_pending", "retired_pages_pending", "row_remap_uncorrectable",
    "gpu_recovery_reset", "gpu_recovery_reboot", "gpu_recovery_drain_p2p", "gpu_recovery_imex", "gpu_recovery_other",
    "nvlink_link_down", "nvlink_missing", "nvlink_errors_growing",
    "sxid_fatal", "fabric_registration_failed", "fabric_not_registered", "fabric_no_cluster", "fabric_clique_split",
    "fabric_in_progress", "fabric_manager_not_running",
    "pcie_aer_fatal", "pcie_aer_nonfatal", "pcie_aer_errors_growing", "pcie_link_degraded",
    "ib_errors_growing", "ib_port_down", "roce_netdev_down",
    "driver_unreachable", "no_gpus_found", "nvml_hang", "nvidia_smi_hang",
})
# A condition is read afresh at every look (a state, not a log line): one that is gone at the next look clears a
# suspect node. An occurrence (an Xid line, a counter that grew) is not seen twice, so it never clears by itself; nor
# does an uncorrectable AER count, which the kernel keeps until a reboot.
CONDITIONS = frozenset({"nvlink_link_down", "nvlink_missing", "fabric_in_progress", "fabric_manager_not_running",
                        "fabric_not_registered", "fabric_no_cluster", "fabric_clique_split", "driver_unreachable",
                        "nvml_hang", "nvidia_smi_hang", "ib_port_down", "roce_netdev_down", "row_remap_pending",
                        "retired_pages_pending", "gpu_recovery_reset", "gpu_recovery_reboot", "gpu_recovery_drain_p2p",
                        "gpu_recovery_imex", "gpu_recovery_other"})
# Which hardware signature names a node's root cause when one look shows several: the first of these wins. The
# driver's recovery action comes after the memory faults: it is what the driver asks for after one (an Xid, an ECC
# error), which names the cause. A fabric that refused or lost a GPU comes before one still training.
PRIORITY = ("gpu_fallen_off_bus", "gpu_lost", "xid_critical", "row_remap_failure", "ecc_uncorrected",
            "row_remap_uncorrectable", "row_remap_pending", "retired_pages_pending",
            "gpu_recovery_reboot", "gpu_recovery_reset", "gpu_recovery_drain_p2p", "gpu_recovery_imex",
            "gpu_recovery_other", "sxid_fatal", "fabric_registration_failed", "fabric_not_registered",
            "fabric_no_cluster", "fabric_clique_split", "fabric_in_progress", "fabric_manager_not_running",
            "nvlink_link_down", "nvlink_missing", "nvlink_errors_growing", "pcie_aer_fatal", "pcie_aer_nonfatal",
            "pcie_aer_errors_growing", "pcie_link_degraded", "ib_port_down", "roce_netdev_down", "ib_errors_growing",
            "driver_unreachable", "no_gpus_found", "nvml_hang", "nvidia_smi_hang")
# The watch's other signatures, recorded and never acted on, each with why. The node-local health command still
# fails a node on the failing ones among them (its exit 1 is a person's or Slurm's call); the loop acts on hardware.
OBSERVATIONS = {
    "agent_check_error": "a check of the agent raised: the agent's fault (the health command answers 2, not 1)",
    "compute_mode_exclusive": "a compute mode an operator set",
    "compute_mode_prohibited": "a compute mode an operator set (nvidia-smi -c): set back, not repaired",
    "cuda_visible_devices_hides_all": "the agent's own environment, not the node",
    "dev_nodes_inaccessible": "the permissions of /dev/nvidia* for the agent's user: the node's setup",
    "dev_nodes_missing": "device nodes not created (nvidia-modprobe, udev): the node's setup",
    "disk_nearly_full": "the host's disk, not its GPUs",
    "driver_library_mismatch": "a driver upgraded without a reboot: the node's software",
    "env_setting_named": "a CUDA / NCCL variable of the agent's environment named beside a finding",
    "env_setting_refused": "a CUDA / NCCL variable of the agent's environment that the stack refuses",
    "fabric_state_unread": "the fabric state could not be read: nothing judged",
    "gpu_memory_held_by_process": "a workload's memory",
    "gpu_throttling": "clocks held back by power or heat: the room or the workload; the burn-in judges the cost",
    "ib_errors_since_reset": "counters with no earlier look to compare with: counted, not growing",
    "ib_link_flaps": "comes with ib_errors_growing, which is hardware",
    "ib_port_missing": "judged against an expected rate an admin set: the node's setup or the expectation",
    "ib_rate_low": "judged against an expected rate an admin set, or against sibling ports that may differ by design",
    "mig_enabled": "a MIG mode an operator set",
    "nvidia_module_missing": "comes with driver_unreachable, which is hardware",
    "nvidia_smi_error": "nvidia-smi failed for a reason its message does not name: shown, not acted on as a guess",
    "nvidia_smi_missing": "comes with driver_unreachable, which is hardware",
    "nvidia_smi_unparsed": "the agent could not read the driver's answer: the agent's fault",
    "nvidia_uvm_missing": "a kernel module not loaded: the node's software (modprobe nvidia_uvm)",
    "nvlink_degraded": "fabric.nvlink reads the same links one by one and names a down one nvlink_link_down",
    "nvlink_errors_since_reset": "counters with no earlier look to compare with: counted, not growing",
    "nvlink_unreadable": "the NVLinks could not be read: nothing judged",
    "pcie_aer_errors_since_reset": "correctable counters with no earlier look to compare with: counted, not growing",
    "persistence_mode_off": "a persistence mode an operator set",
    "python_too_old": "the agent's interpreter, not the node's hardware",
    "roce_mtu_small": "an MTU an operator set",
    "roce_netdev_unknown": "the RoCE port names no netdev: nothing judged",
    "stray_agent_worker": "an earlier agent's GPU worker still running: a process, not hardware",
    "sxid_history": "SXid lines from before the previous validation: history",
    "sxid_nonfatal": "a non-fatal NVSwitch error the switch recovered from (a fatal one is sxid_fatal)",
    "topology_unparsed": "the topology could not be read: nothing judged",
    "xid_history": "Xid lines from before the previous validation: history",
    "xid_other": "an Xid this agent does not class: shown for a person to read, not acted on as a guess",
}

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
