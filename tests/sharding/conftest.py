"""Fixtures of the sharded-planning tests: the failover tests' drill (planners, their
status, SIGKILL and restart)."""

from __future__ import annotations

from tests.failover.conftest import drill_of

__all__ = ["drill_of"]
