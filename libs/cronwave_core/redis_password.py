"""The password of a suite's embedded Redis.

A suite that starts its own redis-server (``cronwave up``, ``cronwave demo``, a private
suite of ``cronwave load``) makes a new random password each time it starts it and
keeps it in ``<data dir>/redis.password``, readable by its owner only. redis-server is
given it on its standard input, never on its command line (which every local user
can read in /proc), and each process of the suite in its ``CRONWAVE_REDIS_URL``. So
another user's process on the machine can neither read nor write the queues, leases
and caches. ``suite.json`` names the file, never the password: a worker joining the
suite (``cronwave worker --data-dir``) reads it from there (``cronwave._suite_find``).

Standard library only: the light CLI reads it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

#: The file in the data dir that holds the embedded Redis's password.
FILE = "redis.password"


def path_in(data_dir: Path) -> Path:
    """Where the password of the embedded Redis of ``data_dir``'s suite is kept."""
    return data_dir / FILE


def new_password() -> str:
    """A new random password (256 bits, hex)."""
    return secrets.token_hex(32)


def keep(data_dir: Path, password: str) -> Path:
    """Write ``password`` to ``path_in(data_dir)`` (mode 0600, replacing the file
    atomically, so a reader sees the old password or the new one)."""
    path = path_in(data_dir)
    part = path.with_name(f".{FILE}.{os.getpid()}")
    part.unlink(missing_ok=True)  # left by a killed writer that had this pid
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(password + "\n")
    os.replace(part, path)
    return path


def read_password(path: Path) -> str:
    """The password kept in ``path``; ``OSError`` when it cannot be read, ``ValueError``
    when it holds none."""
    password = path.read_text().strip()
    if not password:
        raise ValueError(f"{path} holds no password")
    return password


def server_config(password: str) -> bytes:
    """The redis-server configuration, read from its standard input, that makes every
    client authenticate with ``password``."""
    return f"requirepass {password}\n".encode()


def with_password(url: str, password: str) -> str:
    """``url`` (``redis://HOST:PORT/DB``) authenticating with ``password`` (as the
    default user, unless the URL names one)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = quote(parts.username or "", safe="")
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def without_password(url: str) -> str:
    """``url`` with no password in it (its user, if any, kept)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{parts.username}@{host}" if parts.username else host
    return urlunsplit(parts._replace(netloc=netloc))
