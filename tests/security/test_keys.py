"""API key tokens and the cache every service keeps of the answers about them."""

from __future__ import annotations

from datetime import timedelta

from cronwave_core.security.identity import Identity
from cronwave_core.security.keys import (
    CachedKeyCheck,
    matches,
    new_token,
    parse_token,
    secret_hash,
)


def test_a_token_names_its_key_and_only_its_hash_is_needed_to_check_it() -> None:
    key_id, token, digest = new_token()
    parsed = parse_token(token)
    assert parsed is not None and parsed[0] == key_id
    assert matches(parsed[1], digest)
    assert not matches(parsed[1] + "x", digest)
    assert digest == secret_hash(parsed[1]) and parsed[1] not in digest
    # Two keys never share an id or a secret
    assert len({new_token()[1] for _ in range(200)}) == 200


def test_malformed_tokens_are_not_parsed() -> None:
    _, token, _ = new_token()
    for bad in ("", "cwk_", token[:-1], token + "=", token.replace("cwk_", "cwx_"), " " + token):
        assert parse_token(bad) is None, bad


def test_the_cache_asks_once_per_token_until_its_answer_expires() -> None:
    asked: list[str] = []
    alice = Identity("user", "alice", role="viewer", via="api-key", key_id="k")

    def check(token: str) -> Identity | None:
        asked.append(token)
        return alice

    _, token, _ = new_token()
    cached = CachedKeyCheck(check, timedelta(hours=1))
    assert [cached(token) for _ in range(5)] == [alice] * 5
    assert asked == [token]
    # A malformed token is refused without asking
    assert cached("not-a-key") is None and asked == [token]
    # With no cache time every call asks again (a revoked key is seen at once)
    uncached = CachedKeyCheck(check, timedelta(0))
    for _ in range(3):
        uncached(token)
    assert asked == [token] * 4
