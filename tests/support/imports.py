"""What a fresh interpreter loads: the import-direction and start-up tests' probe."""

from __future__ import annotations

import json
import subprocess
import sys

# What only decoding an image needs; a module that does not decode must not load them.
HEAVY = ("pyvips", "PIL", "piexif", "simplejpeg", "numpy")


def loaded_by(module: str) -> set[str]:
    """Top-level packages a fresh interpreter has loaded after ``import module``."""
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return {name.split(".")[0] for name in json.loads(done.stdout)}
