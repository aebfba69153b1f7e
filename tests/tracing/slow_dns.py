"""A DNS server written for the truth trial, and a resolver that asks it.

The server (UDP on loopback) answers every ``A`` question for its ``name`` with
127.0.0.1, and the questions it is told to slow (by their order: the n-th question)
after ``delay``; any other name is NXDOMAIN. ``DnsResolver`` is a
``cronwave_core.telemetry.setup.Resolver`` that asks it over the wire, as a stub
resolver asks the server in ``resolv.conf``. Only what the trial needs of RFC 1035:
one question, ``A`` records, no TCP, no EDNS.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Container, Iterator
from contextlib import contextmanager
from datetime import timedelta

from cronwave_core.telemetry.setup import AddrInfo

_A = 1
_IN = 1
_NXDOMAIN = 3


def _question(name: str, qid: int) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split("."))
    return (
        struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
        + labels
        + b"\0"
        + struct.pack("!HH", _A, _IN)
    )


def _read_name(packet: bytes, at: int) -> tuple[str, int]:
    """The name at ``at`` and the offset after it (a pointer ends it)."""
    labels: list[str] = []
    while True:
        length = packet[at]
        if length & 0xC0 == 0xC0:
            pointed, _ = _read_name(packet, struct.unpack_from("!H", packet, at)[0] & 0x3FFF)
            labels.append(pointed)
            return ".".join(labels), at + 2
        at += 1
        if length == 0:
            return ".".join(labels), at
        labels.append(packet[at : at + length].decode())
        at += length


class SlowDnsServer:
    """Answers ``name``'s ``A`` questions, the n-th (from 0) after ``delay`` when n is
    in ``slow``."""

    def __init__(self, name: str, delay: timedelta, slow: Container[int]) -> None:
        self.name = name.rstrip(".").lower()
        self.delay = delay.total_seconds()
        self.slow = slow
        self.asked = 0
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.1)
        self.address: tuple[str, int] = self._socket.getsockname()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="slow-dns", daemon=True)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                packet, peer = self._socket.recvfrom(512)
            except TimeoutError:
                continue
            reply = self._answer(packet)
            delay = self.delay if self.asked in self.slow else 0.0
            self.asked += 1
            if delay:
                threading.Timer(delay, self._socket.sendto, (reply, peer)).start()
            else:
                self._socket.sendto(reply, peer)

    def _answer(self, packet: bytes) -> bytes:
        qid, _flags = struct.unpack_from("!HH", packet)
        name, end = _read_name(packet, 12)
        qtype, _qclass = struct.unpack_from("!HH", packet, end)
        question = packet[12 : end + 4]
        if name.lower() != self.name:
            return struct.pack("!HHHHHH", qid, 0x8180 | _NXDOMAIN, 1, 0, 0, 0) + question
        answers = 1 if qtype == _A else 0
        header = struct.pack("!HHHHHH", qid, 0x8180, 1, answers, 0, 0)
        record = struct.pack("!HHHIH", 0xC00C, _A, _IN, 30, 4) + socket.inet_aton("127.0.0.1")
        return header + question + (record if answers else b"")

    @contextmanager
    def running(self) -> Iterator[SlowDnsServer]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(timeout=5)
            self._socket.close()


class DnsResolver:
    """A stub resolver asking one DNS server (``A`` records only)."""

    def __init__(self, server: tuple[str, int], timeout: timedelta) -> None:
        self.server = server
        self.timeout = timeout.total_seconds()
        self._qid = 0

    def __call__(self, host: str, port: int) -> list[AddrInfo]:
        self._qid = (self._qid + 1) & 0xFFFF
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(self.timeout)
            sock.sendto(_question(host, self._qid), self.server)
            packet = sock.recv(512)
        qid, flags, _qd, count, _ns, _ar = struct.unpack_from("!HHHHHH", packet)
        if qid != self._qid or flags & 0xF:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: not found")
        _, at = _read_name(packet, 12)
        at += 4
        addresses: list[AddrInfo] = []
        for _ in range(count):
            _, at = _read_name(packet, at)
            rtype, _rclass, _ttl, length = struct.unpack_from("!HHIH", packet, at)
            at += 10
            if rtype == _A:
                address = socket.inet_ntoa(packet[at : at + length])
                addresses.append(
                    (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))
                )
            at += length
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: no address")
        return addresses
