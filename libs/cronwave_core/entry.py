"""How a service process ends when it refuses to start.

A ``CronwaveError`` that escapes a service's ``main()`` (a malformed ``CRONWAVE_``
variable, ``CRONWAVE_INSECURE=1`` with an address beyond loopback, a TLS file it
cannot read, a port another process holds) was raised on purpose, and its message
already says what is wrong and what to do. It is printed as one line on stderr and the
process exits with status 2; a traceback would only bury that sentence. Any other
exception is a bug and keeps its traceback.

A service whose ``main()`` returned (it stopped gracefully) ends without tearing its
interpreter down (``exit_stopped``): the final flushes run, the teardown of its heap does
not.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

from cronwave_core.errors import CronwaveError

#: The exit status of a process that refused to start (as a CLI refuses its arguments).
REFUSED = 2


def refusal_line(service: str, error: CronwaveError) -> str:
    """``<service>: cannot start: <message>`` on one line (a message that already
    names the service is not prefixed twice)."""
    message = " ".join(error.message.split("\n"))
    own = f"{service}: "
    if message.startswith(own):
        message = message[len(own) :]
    return f"{service}: cannot start: {message}"


def refuse(service: str, error: CronwaveError) -> NoReturn:
    """Print ``error`` as the refusal's one line on stderr and exit with ``REFUSED``."""
    print(refusal_line(service, error), file=sys.stderr, flush=True)
    raise SystemExit(REFUSED)


def exit_stopped() -> NoReturn:
    """End a process that stopped gracefully, with status 0, as the interpreter would
    (its other non-daemon threads joined, then what ``atexit`` holds: the span and
    metric exporters' last flush, logging's) but without tearing down its modules and
    objects: for a service's heap (gRPC, protobuf, SQLAlchemy, OpenTelemetry) that
    teardown took 1.0-2.2 s after "stopped" was logged, paid on every stop and restart
    (a drill's, a rolling update's) for nothing."""
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or its reader is gone
            stream.flush()
    os._exit(0)


def entry_point(service: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Wrap a service's ``main()``, the function both ``python -m <package>`` and its
    console script call, so that a ``CronwaveError`` it raises ends the process with
    ``refuse``, and one that returned ends with ``exit_stopped``."""

    def wrap(main: Callable[[], None]) -> Callable[[], None]:
        @functools.wraps(main)
        def run() -> None:
            try:
                main()
            except CronwaveError as exc:
                refuse(service, exc)
            exit_stopped()

        return run

    return wrap
