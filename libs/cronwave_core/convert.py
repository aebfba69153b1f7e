"""Protobuf messages <-> domain values. Field errors name the proto field.

The conversions live beside their types (``Spec.from_proto``, ``Overlap.to_proto``,
``RunState.from_proto``, ...); the well-known types' (``Timestamp``, ``Duration``) in
``wire``, re-exported here for the services that import them from this module.
"""

from __future__ import annotations

from cronwave_core.wire import (
    MAX_DURATION,
    MAX_SECONDS,
    MIN_SECONDS,
    dt_to_ts,
    duration_to_td,
    opt_ts,
    td_to_duration,
    ts_to_dt,
)

__all__ = [
    "MAX_DURATION",
    "MAX_SECONDS",
    "MIN_SECONDS",
    "dt_to_ts",
    "duration_to_td",
    "opt_ts",
    "td_to_duration",
    "ts_to_dt",
]
