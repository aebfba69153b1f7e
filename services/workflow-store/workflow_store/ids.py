"""Run ids that sort by creation time: ``run_`` + 26 characters of Crockford base32
(13 for nanoseconds since the epoch, 13 random), so ``ORDER BY run_id`` is
"oldest first" within this process and approximately so across processes."""

from __future__ import annotations

import secrets
import threading
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # ascending in ASCII
_lock = threading.Lock()
_last_ns = 0


def _b32(value: int, width: int) -> str:
    chars = []
    for _ in range(width):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_run_id() -> str:
    global _last_ns
    with _lock:
        now = max(time.time_ns(), _last_ns + 1)  # strictly increasing in-process
        _last_ns = now
    return "run_" + _b32(now, 13) + _b32(secrets.randbits(65), 13)


def new_attempt_token() -> str:
    """An attempt's token: 128 random bits as 32 hex digits, new at every claim. It is
    the attempt's proof that it holds the run; only the claim's answer carries it."""
    return secrets.token_hex(16)


def same_token(given: str, current: str) -> bool:
    """Whether ``given`` is the run's current attempt token, compared in constant time.
    A run never claimed has no token, and no given token matches it."""
    return bool(current) and secrets.compare_digest(given.encode(), current.encode())
