"""Who may change things from the console, and proof that a change came from its own
page.

**Roles.** A viewer reads every page; an operator also pauses, resumes and triggers
schedules and replays dead letters. Until callers have identities, the console cannot
tell one person from another, so it decides by where it listens: on a loopback
address (``cronwave up``'s default) only people on the machine reach it and each is an
operator; on any other address everyone is a viewer and every change is refused with
a 403 page saying why. ``role_of`` is the one place that decides; it will read the
caller's identity once there is one.

**CSRF.** A change is a POST whose form carries a token bound to a cookie: the token
is an HMAC, under a key made when the process starts, of a random value the browser
holds in a ``SameSite=Strict`` cookie. Another site can make a browser send the
cookie (it cannot with ``Strict``, in browsers that honour it) but cannot read it, so
it cannot compute the token. A restart changes the key: a page loaded before it must
be loaded again.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets

VIEWER, OPERATOR = "viewer", "operator"
COOKIE = "cronwave_console"
FIELD = "csrf_token"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Guard:
    """The console's roles and CSRF tokens, for a console listening on ``host``."""

    def __init__(self, host: str, key: bytes | None = None) -> None:
        self.loopback = is_loopback(host)
        self._key = key or secrets.token_bytes(32)

    def role_of(self, _request: object = None) -> str:
        """The caller's role (see the module docstring)."""
        return OPERATOR if self.loopback else VIEWER

    @property
    def refusal(self) -> str:
        """Why a viewer's change is refused, for the 403 page."""
        return (
            "This console listens on a non-loopback address, so it is read-only: callers "
            "have no identities yet, and a change needs an operator. Run the console on "
            "a loopback address (as `cronwave up` does) or use the `cronwave` CLI."
        )

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def token(self, nonce: str) -> str:
        return hmac.new(self._key, nonce.encode(), hashlib.sha256).hexdigest()

    def valid(self, nonce: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        return hmac.compare_digest(self.token(nonce), token)
