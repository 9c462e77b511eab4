"""Load the report's JSON Schema (works from a checkout and from inside the zipapp)."""

import json
import pkgutil


def load_schema():
    return json.loads(pkgutil.get_data("agents.cudaprobe", "schema.json"))
