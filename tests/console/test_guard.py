"""``console.guard``: who may change things, and the CSRF token."""

from __future__ import annotations

import pytest

from console.guard import OPERATOR, VIEWER, Guard, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
        ("console.internal", False),
        ("", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_on_loopback_everyone_is_an_operator_elsewhere_a_viewer() -> None:
    assert Guard("127.0.0.1").role_of() == OPERATOR
    assert Guard("0.0.0.0").role_of() == VIEWER
    assert "read-only" in Guard("0.0.0.0").refusal


def test_a_token_is_valid_only_for_its_own_cookie_and_process() -> None:
    guard = Guard("127.0.0.1")
    nonce = guard.new_nonce()
    token = guard.token(nonce)
    assert guard.valid(nonce, token)
    assert not guard.valid(guard.new_nonce(), token)
    assert not guard.valid(nonce, "")
    assert not guard.valid(None, token)
    assert not Guard("127.0.0.1").valid(nonce, token)  # a restarted console's key differs
