"""``console.guard``: the CSRF token."""

from __future__ import annotations

from console.guard import Guard


def test_a_token_is_valid_only_for_its_own_cookie_and_process() -> None:
    guard = Guard()
    nonce = guard.new_nonce()
    token = guard.token(nonce)
    assert guard.valid(nonce, token)
    assert not guard.valid(guard.new_nonce(), token)
    assert not guard.valid(nonce, "")
    assert not guard.valid(None, token)
    assert not Guard().valid(nonce, token)  # a restarted console's key differs
