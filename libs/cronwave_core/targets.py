"""What a peer's address setting dials: one service or its replicas.

A setting (``CRONWAVE_STORE_ADDR`` and the other ``*_ADDR``, ``Client(store_addr=...)``)
names a peer three ways:

- ``HOST:PORT``: one address, dialled as it is (a name is looked up by gRPC, and a
  name with several addresses is used one address at a time);
- ``dns:///NAME:PORT``: every address the name has (a Kubernetes headless Service),
  calls spread over them round robin;
- ``IP:PORT,IP:PORT,...``: the replicas of one service, calls spread over them round
  robin. Each is an IP address (IPv4, or ``[IPv6]`` -- one family per list): gRPC
  looks names up one target at a time, so a list of names cannot be one channel.

Round robin keeps a connection to every replica and sends each call to the next one
that is connected: a replica that dies fails only the calls in flight on it (as one
peer's death would), and later calls, streams re-opened included, go to the others.

With mutual TLS every replica of a list is verified against the list's *first* host
(a channel has one name to verify): the certificates ``cronwave up`` makes carry
``127.0.0.1``; with certificates of your own, give each replica's the first listed
address, or name the replicas by DNS (``dns:///``), whose name is the one verified.
Pure: imports no grpc, so the light SDK can use it.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cronwave_core.errors import ConfigurationError

#: gRPC's service config that spreads calls over every address of a target.
ROUND_ROBIN = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})
#: The rule a list breaks, for messages and the configuration table.
RULE = "HOST:PORT, dns:///NAME:PORT, or replicas as IP:PORT,IP:PORT,..."


@dataclass(frozen=True)
class Target:
    """What a channel dials (``target``) and the options it needs for that."""

    target: str
    options: tuple[tuple[str, Any], ...] = ()
    replicas: int = 1  # addresses named (1 for a name, whatever it resolves to)

    def with_options(self, options: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """``options`` plus this target's own (this target's win: it needs them)."""
        own = {name for name, _ in self.options}
        return [o for o in options if o[0] not in own] + list(self.options)


def addresses(value: str) -> list[str]:
    """The addresses a setting names, in order (blanks around commas ignored)."""
    return [part.strip() for part in value.split(",") if part.strip()]


def _ip_address(address: str, where: str) -> tuple[int, str]:
    """(IP version, host as the certificate check wants it) of ``IP:PORT`` or
    ``[IPv6]:PORT``, or ``ConfigurationError`` saying what a list entry must be."""
    host, sep, port = address.rpartition(":")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        ip = None
    if not sep or ip is None or not port.isdigit() or not 0 < int(port) < 65_536:
        raise ConfigurationError(
            f"{where}: a list of replicas takes IP:PORT entries (IPv4, or [IPv6]:PORT), "
            f"got {address!r}; for replicas behind one DNS name give dns:///NAME:PORT"
        )
    if ip.version == 6 and not host.startswith("["):
        raise ConfigurationError(f"{where}: write an IPv6 entry as [ADDRESS]:PORT, got {address!r}")
    return ip.version, bare


def target(value: str, where: str = "address") -> Target:
    """The target ``value`` names (see the module docstring); ``ConfigurationError``
    naming ``where`` (the variable or argument) for a list gRPC cannot dial."""
    named = addresses(value)
    if not named:
        raise ConfigurationError(f"{where}: expected {RULE}, got an empty value")
    if len(named) == 1:
        (only,) = named
        if only.startswith("dns:"):
            return Target(only, (("grpc.service_config", ROUND_ROBIN),))
        return Target(only)
    families = {_ip_address(a, where) for a in named}
    versions = {version for version, _ in families}
    if len(versions) > 1:
        raise ConfigurationError(
            f"{where}: a list of replicas is all IPv4 or all IPv6, got {value!r}"
        )
    _, first = _ip_address(named[0], where)
    scheme = "ipv4:" if versions == {4} else "ipv6:"
    return Target(
        scheme + ",".join(named),
        (("grpc.service_config", ROUND_ROBIN), ("grpc.ssl_target_name_override", first)),
        replicas=len(named),
    )


def one_address(value: str, where: str) -> str:
    """``value`` when it is one address (where a process listens), else
    ``ConfigurationError``: a list names a service's replicas for its callers."""
    if len(addresses(value)) > 1:
        raise ConfigurationError(
            f"{where}: a process listens on one HOST:PORT, got the list {value!r}; a "
            "list names a service's replicas for their callers: start each replica "
            "with its own address in this variable"
        )
    return value.strip()
