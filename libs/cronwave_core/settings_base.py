"""What every settings module shares: the variables' prefix, ``FromEnv``
(``cronwave_core.config``), and ``ProcessSettings``, which every process has (the
data dir other settings default under)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from cronwave_core.config import Derived, Directory, Duration, FromEnv, setting

PREFIX = "CRONWAVE_"


@dataclass(frozen=True, kw_only=True)
class ProcessSettings(FromEnv):
    """What every cronwave process has: where its files go and how long it stops."""

    data_dir: Path = setting(
        PREFIX + "DATA_DIR",
        Directory(),
        Derived(".cronwave", lambda _v, _env: Path(".cronwave").resolve()),
        "SQLite files, span files, logs, embedded Redis files, and the addresses of the "
        "suite running there (`suite.json`), which the CLI's client commands then use",
    )
    grace: timedelta = setting(
        PREFIX + "GRACE",
        Duration(),
        timedelta(seconds=5),
        "graceful-stop period on SIGTERM; a worker gives its running jobs this long to "
        "stop at a checkpoint (see *A worker's graceful stop*)",
    )


__all__ = ["PREFIX", "FromEnv", "ProcessSettings"]
