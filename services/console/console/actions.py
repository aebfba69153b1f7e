"""The console's changes (POST, with the page's CSRF token, by a signed-in person):
pause, resume and trigger a schedule, replay a dead letter. Each is made with the
person's own API key (``Backend``), so the store's rules decide it by their role: a
viewer's is refused with 403 and the store's reason, which names the role it needs.
Each change made answers with a redirect to the page that shows the result (303, so a
reload does not repeat it).

Not signed in, a change is refused (403, with a link to sign in) -- except where the
suite authenticates nobody (``CRONWAVE_INSECURE=1``), where the console, like the
services, listens on loopback only and anyone there may change things.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from console.guard import COOKIE, FIELD
from console.sessions import COOKIE as SESSION_COOKIE
from console.sessions import Session
from cronwave_core.errors import (
    CronwaveError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)

if TYPE_CHECKING:
    from console.app import Console

log = logging.getLogger("console")

#: A note longer than this is cut (the store has its own limit; this keeps a form from
#: sending a megabyte).
MAX_NOTE = 500

#: ``act(console, token, target id, note)``: the change, made with ``token``; returns
#: the page to go to.
Act = Callable[["Console", str, str, str], str]


def _refusal(console: Console, request: Request, fields: dict[str, str]) -> Response | None:
    """The refusal page when this request may not make a change at all, else None."""
    if not console.guard.valid(request.cookies.get(COOKIE), fields.get(FIELD)):
        return console.error(
            request,
            403,
            "Form expired",
            "This form's security token is missing or out of date (the console may have "
            "restarted). Load the page again and repeat the action.",
        )
    if console.backend.authenticates and console.user(request) is None:
        return console.error(
            request,
            403,
            "Sign in to make changes",
            "Changes are made with your own API key: sign in (the link at the top right) "
            "with a key of role operator or admin, then repeat the action.",
        )
    return None


def _change(
    console: Console, request: Request, fields: dict[str, str], act: Act, what: str, ident: str
) -> Response:
    refused = _refusal(console, request, fields)
    if refused is not None:
        return refused
    user: Session | None = console.user(request)
    token = user.token if user is not None else ""
    try:
        target = act(console, token, ident, fields.get("note", "")[:MAX_NOTE])
    except NotFound:
        return console.error(request, 404, "Not found", f"There is no {what} “{ident[:200]}”.")
    except InvalidArgument as exc:
        return console.error(request, 400, "Bad request", exc.message)
    except PermissionDenied as exc:  # the store's rule: the message names the role needed
        log.info("%s was refused a change: %s", user, exc.message)
        return console.error(request, 403, "Not allowed", exc.message)
    except Unauthenticated as exc:  # the key was revoked since signing in
        console.sessions.end(request.cookies.get(SESSION_COOKIE))
        log.info("%s was signed out: the suite refused the key", user)
        response = console.error(
            request,
            403,
            "Signed out",
            f"The suite no longer accepts your API key ({exc.message}), so you are signed "
            "out. Sign in again with a valid key.",
        )
        response.delete_cookie(SESSION_COOKIE, httponly=True, samesite="strict")
        return response
    except Unavailable:
        raise  # the 503 page
    except CronwaveError as exc:  # e.g. FailedPrecondition: the store said why
        return console.error(request, 409, "Not done", exc.message)
    return RedirectResponse(target, status_code=303)


def _schedule_action(act: Act, name: str) -> Callable[[Console, Request, dict[str, str]], Response]:
    def handler(console: Console, request: Request, fields: dict[str, str]) -> Response:
        schedule_id = request.path_params["schedule_id"]
        return _change(console, request, fields, act, "schedule", schedule_id)

    handler.__name__ = name
    return handler


def _pause(console: Console, token: str, schedule_id: str, note: str) -> str:
    console.backend.pause(token, schedule_id, note)
    return f"/schedules/{quote(schedule_id)}"


def _resume(console: Console, token: str, schedule_id: str, note: str) -> str:
    console.backend.resume(token, schedule_id, note)
    return f"/schedules/{quote(schedule_id)}"


def _trigger(console: Console, token: str, schedule_id: str, _note: str) -> str:
    return f"/runs/{quote(console.backend.trigger(token, schedule_id).run_id)}"


def _replay(console: Console, token: str, run_id: str, _note: str) -> str:
    console.backend.replay(token, run_id)
    return f"/runs/{quote(run_id)}"


pause = _schedule_action(_pause, "pause")
resume = _schedule_action(_resume, "resume")
trigger = _schedule_action(_trigger, "trigger")


def replay(console: Console, request: Request, fields: dict[str, str]) -> Response:
    return _change(console, request, fields, _replay, "dead letter", request.path_params["run_id"])
