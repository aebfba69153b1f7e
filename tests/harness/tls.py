"""Certificates of the test session's CA (``tests/conftest.py`` makes one per test
process and points CRONWAVE_TLS_DIR at it), for a test that calls as a service."""

from __future__ import annotations

import dataclasses

import grpc

from cronwave_core.security.tls import new_channel, process_tls
from cronwave_core.settings import TlsSettings


def as_identity(identity: str, token: str = "") -> TlsSettings:
    """This process's TLS settings, presenting ``identity``'s certificate (a service's
    name, ``local-admin`` or ``client``) and sending ``token`` when given."""
    tls = process_tls()
    return dataclasses.replace(
        tls,
        identity=identity,
        cert=tls.tls_dir / f"{identity}.pem",
        key=tls.tls_dir / f"{identity}-key.pem",
        token=token,
    )


def channel(address: str, identity: str = "local-admin", token: str = "") -> grpc.Channel:
    return new_channel(address, (), as_identity(identity, token))
