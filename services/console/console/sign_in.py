"""Signing in and out of the console (see ``console.sessions``).

``GET /sign-in`` is a form for an API key; ``POST /sign-in`` (with the page's CSRF
token) asks the store whom the key names (``AuthenticateApiKey``, as the console) and,
for a valid key, starts a session and sets its id in an HTTP-only, ``SameSite=Strict``
cookie; an unknown, revoked or malformed key gets the form again (401) saying so.
``POST /sign-out`` ends the session and clears the cookie. A log line names the key's
id and its holder, never the key.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from console.guard import COOKIE, FIELD
from console.sessions import COOKIE as SESSION_COOKIE
from console.sessions import LIFETIME

if TYPE_CHECKING:
    from console.app import Console

log = logging.getLogger("console")

#: A pasted key longer than this is not a key (a token is 64 characters).
MAX_KEY = 200


def _next(value: str | None) -> str:
    """Where to go after signing in: a path of this console, else the schedules
    (never another site: ``//host`` and ``/\\host`` are refused)."""
    if value and value.startswith("/") and not value.startswith(("//", "/\\")):
        return value
    return "/"


def sign_in_page(console: Console, request: Request) -> Response:
    return console.render(
        request, "sign_in.html", next=_next(request.query_params.get("next")), problem=""
    )


def _expired(console: Console, request: Request) -> Response:
    return console.error(
        request,
        403,
        "Form expired",
        "This form's security token is missing or out of date (the console may have "
        "restarted). Load the page again and repeat the action.",
    )


def sign_in(console: Console, request: Request, fields: dict[str, str]) -> Response:
    if not console.guard.valid(request.cookies.get(COOKIE), fields.get(FIELD)):
        return _expired(console, request)
    target = _next(fields.get("next"))
    token = fields.get("api_key", "").strip()
    holder = console.backend.authenticate(token) if 0 < len(token) <= MAX_KEY else None
    if holder is None:
        log.info("a sign-in was refused: the API key is unknown, revoked or malformed")
        return console.render(
            request,
            "sign_in.html",
            401,
            next=target,
            problem="That API key is not valid: it is unknown, revoked or malformed. "
            "Paste the whole token (cwk_...) of a key that cronwave auth list-keys shows as "
            "not revoked, or ask an admin for a new one.",
        )
    console.sessions.end(request.cookies.get(SESSION_COOKIE))
    session_id, session = console.sessions.start(holder.name, holder.role, holder.key_id, token)
    log.info("%s signed in", session)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=int(LIFETIME.total_seconds()),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def sign_out(console: Console, request: Request, fields: dict[str, str]) -> Response:
    if not console.guard.valid(request.cookies.get(COOKIE), fields.get(FIELD)):
        return _expired(console, request)
    ended = console.sessions.end(request.cookies.get(SESSION_COOKIE))
    if ended is not None:
        log.info("%s signed out", ended)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict")
    return response
