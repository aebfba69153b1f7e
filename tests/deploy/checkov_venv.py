"""checkov in a venv of its own, for the manifests' tests (``test_manifests.py``).

checkov pins many packages exactly (packaging, boto3, ...), so it never shares the
project's venv. Its venv lives in the user's cache, where the next checkout's tests
find it; installing it takes about a minute of one core. ``make test`` runs this file
beside ``make setup`` (both mostly one core each: the pair takes the time of the
longer), so that the tests, bound by CPU, do not pay for the install; ``make demo``
never does. Standard library only: it runs before the project's venv exists.

``python tests/deploy/checkov_venv.py``: install it unless it is there and works.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

REQUIREMENT = "checkov>=3.2,<4"
VENV = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "cronwave-tests"
    / f"checkov-{sys.version_info.major}.{sys.version_info.minor}"
)
CHECKOV = VENV / "bin" / "checkov"


def checkov() -> Path:
    """The checkov command, installed first when it is missing or broken. A lock keeps
    concurrent callers (``make test``'s installer, parallel tests) in turn: the second
    finds the first's install."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with (VENV.parent / "checkov.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not CHECKOV.exists() or not _works():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
            subprocess.run(
                [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", REQUIREMENT],
                check=True,
                timeout=600,
            )
    return CHECKOV


def _works() -> bool:
    done = subprocess.run(
        [str(CHECKOV), "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    return done.returncode == 0


if __name__ == "__main__":
    print(f"checkov for the manifests' tests: {checkov()}")
