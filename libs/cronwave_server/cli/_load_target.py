"""Which suite ``cronwave load`` drives: the configured one when it answers, else a
private one it starts and stops."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cronwave import _suite_find, _suite_record
from cronwave_bench.load_drive import Target
from cronwave_core.errors import Unavailable
from cronwave_core.security.tls import new_channel
from cronwave_core.settings import NetworkSettings, ProcessSettings, RedisSettings, TlsSettings
from cronwave_core.suite import Suite
from cronwave_server.cli.suite_cmds import running, suite_config


def _reachable(address: str, tls: TlsSettings, timeout: float = 1.0) -> bool:
    with new_channel(address, (), tls) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


@contextmanager
def suite_target(data_dir: Path | None, connect: bool) -> Iterator[tuple[Target, Suite | None]]:
    """The configured suite when it answers, else (unless ``connect``) a private one.
    Configured: by its variables, else the running suite of the data dir
    (``cronwave._suite_find``: ``CRONWAVE_DATA_DIR``, else the per-user one); with
    neither, the fixed ports are tried."""
    try:
        env = _suite_find.suite_env(os.environ, None, ("store", "dispatcher", "redis"))
    except _suite_record.SuiteNotRunning:
        env = dict(os.environ)
    network = NetworkSettings.from_env(env)
    redis = RedisSettings.from_env(env)
    tls = TlsSettings.from_env(env)
    if (tls.insecure or tls.ca.exists()) and _reachable(network.store_addr, tls):
        if _reachable(network.dispatcher_addr, tls):
            yield (
                Target(
                    network.store_addr,
                    network.dispatcher_addr,
                    redis.redis_url,
                    redis.namespace,
                    tls=tls,
                ),
                None,
            )
            return
        return
    if connect:
        raise Unavailable(f"no suite answers at {network.store_addr} and {network.dispatcher_addr}")
    suite = Suite(suite_config(data_dir or ProcessSettings.from_env().data_dir, ports={}))
    with running(suite):
        target = Target(
            suite.store_addr,
            suite.dispatcher_addr,
            suite.redis_url,
            redis.namespace,
            tls=suite.tls(),
        )
        yield target, suite
