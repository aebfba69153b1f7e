"""The console's changes (POST, operators only, with the page's CSRF token): pause,
resume and trigger a schedule, replay a dead letter. Each answers with a redirect
to the page that shows the result (303, so a reload does not repeat it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from console.guard import COOKIE, FIELD, OPERATOR
from cronwave_core.errors import CronwaveError, InvalidArgument, NotFound, Unavailable

if TYPE_CHECKING:
    from console.app import Console

#: A note longer than this is cut (the store has its own limit; this keeps a form from
#: sending a megabyte).
MAX_NOTE = 500


def _allowed(console: Console, request: Request, fields: dict[str, str]) -> Response | None:
    """The refusal page when this change may not be made, else ``None``."""
    if console.guard.role_of(request) != OPERATOR:
        return console.error(request, 403, "Read-only console", console.guard.refusal)
    if not console.guard.valid(request.cookies.get(COOKIE), fields.get(FIELD)):
        return console.error(
            request,
            403,
            "Form expired",
            "This form's security token is missing or out of date (the console may have "
            "restarted). Load the page again and repeat the action.",
        )
    return None


def _schedule_action(
    act: Callable[[Console, str, str], object],
) -> Callable[[Console, Request, dict[str, str]], Response]:
    def handler(console: Console, request: Request, fields: dict[str, str]) -> Response:
        refused = _allowed(console, request, fields)
        if refused is not None:
            return refused
        schedule_id = request.path_params["schedule_id"]
        try:
            target = act(console, schedule_id, fields.get("note", "")[:MAX_NOTE])
        except NotFound:
            return console.error(
                request, 404, "Not found", f"There is no schedule “{schedule_id}”."
            )
        except InvalidArgument as exc:
            return console.error(request, 400, "Bad request", exc.message)
        except Unavailable:
            raise  # the 503 page
        except CronwaveError as exc:  # e.g. FailedPrecondition: the store said why
            return console.error(request, 409, "Not done", exc.message)
        return RedirectResponse(str(target), status_code=303)

    return handler


def _pause(console: Console, schedule_id: str, note: str) -> str:
    console.backend.pause(schedule_id, note)
    return f"/schedules/{quote(schedule_id)}"


def _resume(console: Console, schedule_id: str, note: str) -> str:
    console.backend.resume(schedule_id, note)
    return f"/schedules/{quote(schedule_id)}"


def _trigger(console: Console, schedule_id: str, _note: str) -> str:
    return f"/runs/{quote(console.backend.trigger(schedule_id).run_id)}"


pause = _schedule_action(_pause)
resume = _schedule_action(_resume)
trigger = _schedule_action(_trigger)
pause.__name__, resume.__name__, trigger.__name__ = "pause", "resume", "trigger"


def replay(console: Console, request: Request, fields: dict[str, str]) -> Response:
    refused = _allowed(console, request, fields)
    if refused is not None:
        return refused
    run_id = request.path_params["run_id"]
    try:
        console.backend.replay(run_id)
    except NotFound:
        return console.error(request, 404, "Not found", f"There is no dead letter “{run_id}”.")
    except InvalidArgument as exc:
        return console.error(request, 400, "Bad request", exc.message)
    except Unavailable:
        raise  # the 503 page
    except CronwaveError as exc:  # e.g. the run is not dead-lettered
        return console.error(request, 409, "Not done", exc.message)
    return RedirectResponse(f"/runs/{quote(run_id)}", status_code=303)
