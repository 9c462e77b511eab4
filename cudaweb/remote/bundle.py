"""The agent as one zipapp, content-hashed so a host keeps one copy per agent version."""

import hashlib
import io
import zipfile
from functools import lru_cache
from pathlib import Path

AGENTS_DIR = Path(__file__).resolve().parents[2] / "agents"
MAIN = "import sys\nfrom agents.cudaprobe.cli import main\nsys.exit(main())\n"


@lru_cache(maxsize=1)
def build():
    """(payload bytes, sha256 hex) of the zipapp holding the `agents` package."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(AGENTS_DIR.rglob("*")):
            if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
                info = zipfile.ZipInfo(str(path.relative_to(AGENTS_DIR.parent)), date_time=(2020, 1, 1, 0, 0, 0))
                archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
        archive.writestr(zipfile.ZipInfo("__main__.py", date_time=(2020, 1, 1, 0, 0, 0)), MAIN)
    payload = b"#!/usr/bin/env python3\n" + buffer.getvalue()
    return payload, hashlib.sha256(payload).hexdigest()
