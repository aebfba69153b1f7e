"""Secrets kept out of what a process prints: the password of a URL, a bearer token, an
API key (``cwk_…``).

Every log line goes through ``redact`` (``cronwave_core.logs``), and so does every
place that shows a configured URL (``cronwave up``'s table, a settings error, the
store's start-up line), so a ``CRONWAVE_DATABASE_URL`` or ``CRONWAVE_REDIS_URL`` that
carries a password, or a caller's API key, is never written out whole. What is
masked keeps its shape (``postgresql+psycopg://billing:***@db/cronwave``,
``Bearer ***``, ``cwk_***``), so a line still says which URL or which kind of
credential it was about.

This is a last line of defence for text, not a reason to log a credential: code that
holds one still passes ``redact_url(url)`` rather than the URL.
"""

from __future__ import annotations

import re

#: What a masked secret reads as.
MASK = "***"

# scheme://user:password@ — the password is what lies between the first ':' after the
# scheme's '//' and the '@' (an '@' or '/' inside a password must be percent-encoded).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s\"'<>]*):[^@\s\"'<>/]+@")
# As the authorization header spells it; a token is at least 8 characters, so prose
# ("Bearer of news") is left alone. An API key is masked by its prefix anyway.
_BEARER = re.compile(r"(?P<head>\b(?:Bearer|BEARER|bearer)\s+)[A-Za-z0-9\-._~+/]{8,}=*")
_API_KEY = re.compile(r"\bcwk_[A-Za-z0-9_\-]+")


def redact(text: str) -> str:
    """``text`` with every URL password, bearer token and ``cwk_`` API key masked."""
    if "://" in text:
        text = _URL_PASSWORD.sub(rf"\g<head>:{MASK}@", text)
    if "earer" in text or "EARER" in text:  # Bearer, bearer, BEARER
        text = _BEARER.sub(rf"\g<head>{MASK}", text)
    if "cwk_" in text:
        text = _API_KEY.sub(f"cwk_{MASK}", text)
    return text


def redact_url(url: str) -> str:
    """``url`` as it may be shown: a SQLAlchemy URL rendered by SQLAlchemy with its
    password hidden, any other (``redis://:secret@host``) with the password masked."""
    try:
        from sqlalchemy.engine import make_url
    except ImportError:  # the SDK alone: no SQLAlchemy, the pattern does it
        return redact(url)
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a SQLAlchemy URL (or malformed): the pattern does it
        return redact(url)
    return redact(shown)
