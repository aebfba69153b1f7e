"""A webhook receiver on loopback for the deadline tests: ``http.server`` in a thread,
recording every POST; each path answers as the test set it up (200, 500, or an answer
held past the notifier's timeout)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: The longest a held answer waits (the notifier's timeout in these tests is shorter).
HOLD_SECONDS = 3.0
#: POSTs a receiver keeps at most: a runaway sender cannot fill the test's memory.
MAX_POSTS = 1_000


@dataclass(frozen=True)
class Post:
    path: str
    body: dict[str, Any]
    content_type: str


class Receiver:
    def __init__(self) -> None:
        self.address: tuple[str, int] = ("127.0.0.1", 0)
        self._lock = threading.Lock()
        self._posts: list[Post] = []
        #: path -> status to answer; "hold" answers 200 only after HOLD_SECONDS.
        self.answers: dict[str, int | str] = {}
        self.released = threading.Event()

    @property
    def base(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def url(self, path: str, answer: int | str = 200) -> str:
        self.answers[path] = answer
        return self.base + path

    def record(self, post: Post) -> None:
        with self._lock:
            if len(self._posts) < MAX_POSTS:
                self._posts.append(post)

    def posts(self, path: str | None = None) -> list[Post]:
        with self._lock:
            return [p for p in self._posts if path is None or p.path == path]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = min(int(self.headers.get("Content-Length") or 0), 1 << 20)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"_unparsed": raw.decode(errors="replace")}
            receiver.record(Post(self.path, body, self.headers.get("Content-Type", "")))
            answer = receiver.answers.get(self.path, 404)
            if answer == "hold":
                receiver.released.wait(HOLD_SECONDS)
                answer = 200
            try:
                self.send_response(int(answer))
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
            except (BrokenPipeError, ConnectionResetError):
                pass  # a held answer: the notifier gave up on it (its timeout)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def receiver() -> Iterator[Receiver]:
    """A running receiver on 127.0.0.1 (a free port), shut down at the end."""
    rec = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rec))
    server.daemon_threads = True
    rec.address = ("127.0.0.1", int(server.server_address[1]))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield rec
    finally:
        rec.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
