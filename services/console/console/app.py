"""The console's Starlette application: routes, templates, and the pages a failure
becomes (404 for an unknown schedule or run, 503 when a service does not answer, 500
otherwise -- none shows a traceback or an address; the log has the details)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from console import actions, pages, sign_in
from console.backend import Backend
from console.guard import COOKIE, Guard
from console.metrics import REQUESTS
from console.sessions import COOKIE as SESSION_COOKIE
from console.sessions import Session, Sessions
from console.slots import human
from console.traces import SpanRuns
from cronwave_core.errors import InvalidArgument, NotFound, Unavailable
from cronwave_core.http_health import CONSOLE_HEALTH
from cronwave_waterfall.render_html import STYLE

log = logging.getLogger("console")
HERE = Path(__file__).parent


@dataclass(frozen=True)
class Console:
    """What every page needs: the suite, the spans, the guard, the sessions and the
    settings."""

    backend: Backend
    spans: SpanRuns
    guard: Guard
    sessions: Sessions
    slots: int
    late_after: timedelta
    jaeger_url: str | None
    templates: Environment

    def user(self, request: Request) -> Session | None:
        """The person signed in on this browser, or None."""
        return self.sessions.get(request.cookies.get(SESSION_COOKIE))

    def may_change(self, user: Session | None) -> bool:
        """Whether a page shows its buttons: to operators and admins, or to everyone
        where the suite authenticates nobody (``CRONWAVE_INSECURE=1``)."""
        return not self.backend.authenticates or (user is not None and user.may_change)

    def render(
        self, request: Request, template: str, status: int = 200, **context: Any
    ) -> HTMLResponse:
        """``template`` with ``context``, who is signed in and a CSRF token bound to
        the console cookie (set here when the browser has none)."""
        nonce = request.cookies.get(COOKIE)
        fresh = not nonce
        nonce = nonce or self.guard.new_nonce()
        user = self.user(request)
        authenticates = self.backend.authenticates
        page = self.templates.get_template(template).render(
            request=request,
            user=user,
            role=user.role if user else ("viewer" if authenticates else "insecure"),
            may_change=self.may_change(user),
            authenticates=authenticates,
            csrf=self.guard.token(nonce),
            jaeger_url=self.jaeger_url,
            **context,
        )
        response = HTMLResponse(page, status_code=status)
        if fresh:
            response.set_cookie(COOKIE, nonce, httponly=True, samesite="strict")
        return response

    def error(self, request: Request, status: int, title: str, message: str) -> HTMLResponse:
        return self.render(request, "error.html", status, title=title, message=message)


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
    )
    env.filters["human"] = human
    env.filters["utc"] = lambda t: "-" if t is None else f"{t:%Y-%m-%d %H:%M:%S}Z"
    env.filters["local"] = lambda t, zone: "-" if t is None else _local(t, zone)
    env.filters["offset"] = _offset
    env.globals["waterfall_style"] = scoped(STYLE, ".wf")
    return env


def scoped(css: str, scope: str) -> str:
    """``css`` (plain rules, no at-rules) applied inside ``scope`` only: the waterfall's
    page styles its whole document, the console only its chart. ``body`` rules go."""
    rules = []
    for selectors, declarations in re.findall(r"([^{}]+)\{([^}]*)\}", css):
        kept = [f"{scope} {sel.strip()}" for sel in selectors.split(",") if sel.strip() != "body"]
        if kept:
            rules.append(f"{', '.join(kept)} {{{declarations}}}")
    return "\n".join(rules)


def _offset(delta: timedelta) -> str:
    minutes = int(delta.total_seconds()) // 60
    sign, minutes = ("-" if minutes < 0 else "+"), abs(minutes)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _local(moment: Any, zone: str) -> str:
    from cronwave_core.domain.calendar import zone as tz

    local = moment.astimezone(tz(zone))
    name = local.tzname()
    return f"{local:%Y-%m-%d %H:%M:%S} {name}" + ("" if name == zone else f" ({zone})")


def healthz(_request: Request) -> Response:
    return PlainTextResponse(CONSOLE_HEALTH.decode())


def favicon(_request: Request) -> Response:
    """Where a browser (or a bookmark) that ignores the page's icon link looks."""
    return RedirectResponse("/static/favicon.svg", status_code=301)


def build_app(
    backend: Backend,
    spans: SpanRuns,
    guard: Guard,
    *,
    sessions: Sessions | None = None,
    slots: int = 24,
    late_after: timedelta = timedelta(seconds=5),
    jaeger_url: str | None = None,
) -> Starlette:
    console = Console(
        backend,
        spans,
        guard,
        sessions or Sessions(),
        slots,
        late_after,
        jaeger_url,
        _environment(),
    )

    def bound(handler: Any) -> Any:
        def endpoint(request: Request) -> Response:
            response: Response = handler(console, request)
            REQUESTS.labels(handler.__name__, str(response.status_code)).inc()
            return response

        return endpoint

    async def bound_post(request: Request, handler: Any) -> Response:
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        result: Response = await run_in_threadpool(handler, console, request, fields)
        REQUESTS.labels(handler.__name__, str(result.status_code)).inc()
        return result

    def post(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            return await bound_post(request, handler)

        return endpoint

    routes = [
        Route("/", bound(pages.schedules)),
        Route("/sign-in", bound(sign_in.sign_in_page)),
        Route("/sign-in", post(sign_in.sign_in), methods=["POST"]),
        Route("/sign-out", post(sign_in.sign_out), methods=["POST"]),
        Route("/schedules/{schedule_id:path}/pause", post(actions.pause), methods=["POST"]),
        Route("/schedules/{schedule_id:path}/resume", post(actions.resume), methods=["POST"]),
        Route("/schedules/{schedule_id:path}/trigger", post(actions.trigger), methods=["POST"]),
        Route("/schedules/{schedule_id:path}", bound(pages.schedule)),
        Route("/runs/{run_id}/live", bound(pages.run_live)),
        Route("/runs/{run_id}", bound(pages.run)),
        Route("/waterfall", bound(pages.waterfall_page)),
        Route("/waterfall/chart", bound(pages.waterfall_chart)),
        Route("/dead-letters", bound(pages.dead_letters)),
        Route("/dead-letters/{run_id}/replay", post(actions.replay), methods=["POST"]),
        Route("/health", bound(pages.health)),
        Route("/healthz", healthz),
        Route("/favicon.ico", favicon),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException) and exc.status_code == 405:
            return console.error(request, 405, "Not allowed", "This page only reads.")
        return console.error(request, 404, "Not found", "There is no such page.")

    async def unknown(request: Request, exc: Exception) -> Response:
        what = getattr(exc, "message", "") or "It does not exist."
        return console.error(request, 404, "Not found", str(what))

    async def invalid(request: Request, exc: Exception) -> Response:
        return console.error(request, 400, "Bad request", str(exc))

    async def unavailable(request: Request, exc: Exception) -> Response:
        log.warning("a service did not answer: %s", exc)
        return console.error(
            request,
            503,
            "A service did not answer",
            "The suite did not answer in time. The health page shows which service is "
            "down; try again once it is back.",
        )

    async def failed(request: Request, exc: Exception) -> Response:
        log.exception("page %s failed", request.url.path, exc_info=exc)
        return console.error(
            request, 500, "Something went wrong", "The console's log has the details."
        )

    return Starlette(
        routes=routes,
        exception_handlers={
            404: not_found,
            405: not_found,
            NotFound: unknown,
            InvalidArgument: invalid,
            Unavailable: unavailable,
            Exception: failed,
        },
    )
