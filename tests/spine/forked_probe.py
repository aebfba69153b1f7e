"""Run by tests/spine/test_forked.py as ``python -P -m tests.spine.forked_probe``,
forked or not: says what its process was given, then exits as told."""

import json
import os
import sys
import time

print(
    json.dumps(
        {
            "env": os.environ.get("PROBE_VALUE"),
            "cwd": os.getcwd(),
            "sid": os.getsid(0) == os.getpid(),
            "stdin": sys.stdin.read(),
            "argv0": sys.argv[0],
            "name": __name__,
            "shadowed": "shadow_me" in sys.modules,
        }
    ),
    flush=True,
)
if os.environ.get("PROBE_SLEEP"):
    time.sleep(float(os.environ["PROBE_SLEEP"]))
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
