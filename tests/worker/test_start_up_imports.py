"""What a job process loads before its first run: every worker keeps warm job
processes, and each one's start-up is paid again whenever one is replaced."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("sqlalchemy", "dramatiq.brokers.redis", "cronwave._client")


def test_a_job_process_loads_no_database_broker_or_sdk_until_a_job_needs_one():
    code = (
        "import json, sys, worker.job_body; "
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(out.stdout) == []
