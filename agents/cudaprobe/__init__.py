"""cudaprobe: a layered GPU node validation agent (stdlib + torch + optional pynvml)."""

AGENT_VERSION = "0.3.0"
REPORT_SCHEMA = "cudaprobe/1"
