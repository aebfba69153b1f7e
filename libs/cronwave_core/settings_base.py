"""What every settings module shares: the variables' prefix, ``FromEnv``
(``cronwave_core.config``), and ``ProcessSettings``, which every process has (the
data dir other settings default under)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from cronwave_core.config import Derived, Directory, Duration, FromEnv, Switch, setting
from cronwave_core.errors import ConfigurationError

PREFIX = "CRONWAVE_"
#: How the docs and the errors spell the default data dir.
USER_DATA_DIR = "$XDG_STATE_HOME/cronwave, else ~/.local/state/cronwave"


def user_data_dir(env: Mapping[str, str]) -> Path:
    """The data dir when none is given: ``$XDG_STATE_HOME/cronwave`` (an absolute
    ``XDG_STATE_HOME`` only, as the XDG spec says), else
    ``~/.local/state/cronwave``. One per user, whatever the current folder, so a
    command run anywhere finds the suite ``cronwave up`` started anywhere."""
    state = env.get("XDG_STATE_HOME", "")
    if os.path.isabs(state):
        return Path(state) / "cronwave"
    home = env.get("HOME", "")
    if not os.path.isabs(home):
        try:
            home = str(Path.home())
        except RuntimeError as exc:
            raise ConfigurationError(
                f"{PREFIX}DATA_DIR: unset, and there is no home directory for the default "
                f"({USER_DATA_DIR}); set {PREFIX}DATA_DIR or XDG_STATE_HOME"
            ) from exc
    return Path(home) / ".local" / "state" / "cronwave"


@dataclass(frozen=True, kw_only=True)
class ProcessSettings(FromEnv):
    """What every cronwave process has: where its files go and how long it stops."""

    data_dir: Path = setting(
        PREFIX + "DATA_DIR",
        Directory(),
        Derived(USER_DATA_DIR, lambda _v, env: user_data_dir(env)),
        "SQLite files, span files, logs, embedded Redis files, and the record of the "
        "suite running there (`suite.json`), through which the CLI, `Client()`, "
        "`cronwave worker` and the console find that suite (see *Which suite a client "
        "talks to*)",
    )
    grace: timedelta = setting(
        PREFIX + "GRACE",
        Duration(),
        timedelta(seconds=5),
        "graceful-stop period on SIGTERM; a worker gives its running jobs this long to "
        "stop at a checkpoint (see *A worker's graceful stop*)",
    )
    fork_services: bool = setting(
        PREFIX + "FORK_SERVICES",
        Switch(),
        True,
        "a suite (`cronwave up`, `cronwave demo`) forks its services from one fork "
        "server that imported their libraries once, which halves a service's start-up "
        "CPU; `off`: each starts as a new interpreter",
    )


__all__ = ["PREFIX", "USER_DATA_DIR", "FromEnv", "ProcessSettings", "user_data_dir"]
