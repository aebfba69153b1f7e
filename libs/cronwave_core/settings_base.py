"""What every settings class shares: the variables' prefix and ``from_env``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Self

from cronwave_core import config

PREFIX = "CRONWAVE_"


class FromEnv:
    """``from_env`` for a settings dataclass (``cronwave_core.config.load``)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        return config.load(cls, os.environ if env is None else env)
