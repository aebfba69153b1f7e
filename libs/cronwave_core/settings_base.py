"""What every settings module shares: the variables' prefix, and ``FromEnv``
(``cronwave_core.config``)."""

from __future__ import annotations

from cronwave_core.config import FromEnv

PREFIX = "CRONWAVE_"

__all__ = ["PREFIX", "FromEnv"]
