"""``cronwave-probe ADDRESS``: a Kubernetes exec probe (and Tilt's readiness probe)
that asks a service's gRPC health check over mutual TLS with the process's own
certificate (``CRONWAVE_TLS_*``: in a pod, the files of its Secret). The kubelet's own
gRPC probe cannot present a client certificate, and every service requires one.

- ``--ready`` (the default): exit 0 when the service answers ``SERVING``. A service
  whose gRPC server is not serving yet, or that is stopping (``NOT_SERVING`` from
  SIGTERM on), is not ready, so no caller is sent to it.
- ``--live``: exit 0 when the service answers at all within ``--timeout``, whatever
  its status. A process that cannot answer one health check in that time (its server
  threads all stuck, the process frozen) is not alive and is restarted; one that is
  stopping is still alive, so its graceful stop is not cut short.

It judges the gRPC server only: a service's own loops (the planner's fires, the
worker's jobs) have their metrics and alerts (docs/operations/metrics-and-alerts.md).
Exit status 1 and one line on stdout (the kubelet keeps it in the pod's events) when
the check fails.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

#: Exit status of a failed check.
FAILED = 1


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="cronwave-probe",
        description="Ask a cronwave service's gRPC health check with this process's "
        "certificate (CRONWAVE_TLS_*); exit 0 when it passes.",
    )
    parser.add_argument("address", help="HOST:PORT of the service, e.g. localhost:7401")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--ready", dest="live", action="store_false", help="pass on SERVING (the default)"
    )
    mode.add_argument("--live", action="store_true", help="pass on any answer")
    parser.add_argument(
        "--timeout", type=float, default=3.0, help="seconds to wait for the answer (default 3)"
    )
    parser.add_argument("--service", default="", help="the health service name (default: all)")
    args = parser.parse_args(argv)
    if not 0 < args.timeout <= 60:
        parser.error(f"--timeout: must be more than 0 and at most 60 seconds, got {args.timeout}")
    return args


def check(address: str, live: bool, timeout: float, service: str = "") -> str | None:
    """None when the check passes, else why it failed (one line)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from cronwave_core.errors import CronwaveError
    from cronwave_core.security.tls import new_channel
    from cronwave_core.settings import TlsSettings

    try:
        tls = TlsSettings.from_env()
    except CronwaveError as exc:
        return f"cannot read this process's TLS settings: {exc.message}"
    with new_channel(address, (), tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            name = code.name if code is not None else type(exc).__name__
            return f"{address}: no health answer within {timeout:g}s ({name})"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if live or reply.status == health_pb2.HealthCheckResponse.SERVING:
        return None
    return f"{address}: {status}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    failure = check(args.address, args.live, args.timeout, args.service)
    if failure is None:
        return 0
    print(failure, flush=True)
    return FAILED


def run() -> None:
    """The console script's entry."""
    sys.exit(main())
