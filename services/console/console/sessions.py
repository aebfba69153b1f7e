"""Who is signed in to the console: a session per sign-in, held in the console's
memory only.

A person signs in by pasting an API key; the console checks it with the store's
``AuthenticateApiKey`` and keeps it here, under a random session id (256 bits) that is
all the browser holds, in an HTTP-only, ``SameSite=Strict`` cookie. The key never
leaves the process again except as the bearer token of that person's changes: it is
in no cookie, page or log line (``Session`` leaves it out of its ``repr``).

A session ends when the person signs out, ``IDLE`` after its last request, ``LIFETIME``
after it began whatever they do, when the store refuses its key (revoked), or when
``MAX_SESSIONS`` newer ones push it out (the least recently used goes first) -- so a
flood of sign-ins costs bounded memory. A restart of the console ends them all:
everyone signs in again.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from cachetools import TLRUCache

#: The cookie that holds a signed-in person's session id (never their key).
COOKIE = "cronwave_session"
#: A session ends this long after its last request ...
IDLE = timedelta(hours=1)
#: ... and this long after its sign-in, whatever happens.
LIFETIME = timedelta(hours=8)
#: At most this many sessions at once; a sign-in beyond it ends the least recently used.
MAX_SESSIONS = 1000
#: Roles whose holders may make changes (the store decides each one; this only says
#: which buttons a page shows).
CHANGERS = frozenset({"operator", "admin"})


@dataclass(frozen=True)
class Session:
    """One signed-in person: ``name`` and ``role`` of their API key (``key_id`` names
    it in logs), and the key itself, which only the person's own calls send."""

    name: str
    role: str
    key_id: str
    token: str = field(repr=False)
    started: float = field(repr=False, default=0.0)

    @property
    def may_change(self) -> bool:
        return self.role in CHANGERS

    def __str__(self) -> str:
        return f"user {self.name} ({self.role}, API key {self.key_id})"


class Sessions:
    """The console's sessions, keyed by session id. ``clock`` is monotonic seconds
    (injected, so tests of expiry need not wait)."""

    def __init__(
        self,
        *,
        idle: timedelta = IDLE,
        lifetime: timedelta = LIFETIME,
        limit: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1:
            raise ValueError("limit: must be at least 1")
        idle_s, lifetime_s = idle.total_seconds(), lifetime.total_seconds()
        self._clock = clock
        self._lock = threading.Lock()
        # session id -> session, least recently used first; an entry expires at its
        # idle end, counted again from each use, or at its lifetime's, the earlier.
        self._open: TLRUCache[str, Session] = TLRUCache(
            limit,
            lambda _id, session, now: min(now + idle_s, session.started + lifetime_s),
            timer=clock,
        )

    def start(self, name: str, role: str, key_id: str, token: str) -> tuple[str, Session]:
        """A new session and its id (a fresh one for every sign-in, so an id known
        before signing in is worth nothing after)."""
        session = Session(name, role, key_id, token, started=self._clock())
        session_id = secrets.token_urlsafe(32)
        with self._lock:
            self._open[session_id] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of ``session_id`` (its idle time starts again), or None
        for an unknown, ended or expired one (which is then forgotten)."""
        if not session_id:
            return None
        with self._lock:
            try:
                session = self._open[session_id]
            except KeyError:
                self._open.expire()  # an expired one is forgotten
                return None
            self._open[session_id] = session  # its idle time starts again
            return session

    def end(self, session_id: str | None) -> Session | None:
        """End ``session_id``'s session; the session it was, if any."""
        if not session_id:
            return None
        with self._lock:
            return self._open.pop(session_id, None)

    def __len__(self) -> int:
        with self._lock:
            self._open.expire()
            return len(self._open)
