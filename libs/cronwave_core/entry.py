"""How a service process ends when it refuses to start.

A ``CronwaveError`` that escapes a service's ``main()`` (a malformed ``CRONWAVE_``
variable, ``CRONWAVE_INSECURE=1`` with an address beyond loopback, a TLS file it
cannot read, a port another process holds) was raised on purpose, and its message
already says what is wrong and what to do. It is printed as one line on stderr and the
process exits with status 2; a traceback would only bury that sentence. Any other
exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import sys
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


def entry_point(service: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    """Wrap a service's ``main()``, the function both ``python -m <package>`` and its
    console script call, so that a ``CronwaveError`` it raises ends the process with
    ``refuse``."""

    def wrap(main: Callable[[], None]) -> Callable[[], None]:
        @functools.wraps(main)
        def run() -> None:
            try:
                main()
            except CronwaveError as exc:
                refuse(service, exc)

        return run

    return wrap
