"""Proof that a change came from the console's own page (CSRF).

A change is a POST whose form carries a token bound to a cookie: the token is an
HMAC, under a key made when the process starts, of a random value the browser holds
in a ``SameSite=Strict``, HTTP-only cookie. Another site can make a browser send the
cookie (it cannot with ``Strict``, in browsers that honour it) but cannot read it, so
it cannot compute the token. A restart changes the key: a page loaded before it must
be loaded again. Signing in and out are such POSTs too, so another site can neither
sign a browser in under its own key nor out.

Who may make a change is not decided here: the person's own API key is sent with it
and the store's rules decide (``console.sessions``, ``console.actions``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

COOKIE = "cronwave_console"
FIELD = "csrf_token"


class Guard:
    """The console's CSRF tokens, under a key of this process."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def token(self, nonce: str) -> str:
        return hmac.new(self._key, nonce.encode(), hashlib.sha256).hexdigest()

    def valid(self, nonce: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        return hmac.compare_digest(self.token(nonce), token)
