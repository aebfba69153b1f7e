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


def test_an_answer_is_trusted_for_the_ttl_from_when_it_was_asked_and_no_longer() -> None:
    # Given a cache of 1 s on a clock the test moves, and a key the store then revokes
    now = [100.0]
    revoked = [False]
    alice = Identity("user", "alice", role="operator", via="api-key", key_id="k")
    asked: list[float] = []

    def check(token: str) -> Identity | None:
        asked.append(now[0])
        return None if revoked[0] else alice

    _, token, _ = new_token()
    cached = CachedKeyCheck(check, timedelta(seconds=1), clock=lambda: now[0])
    assert cached(token) == alice  # asked at 100.0
    revoked[0] = True

    # When the key is used all through its second, cache hits every 100 ms
    seen = []
    for step in range(1, 10):
        now[0] = 100.0 + step / 10
        seen.append(cached(token))

    # Then those hits trusted the first answer and did not extend its life: at 101.0
    # the store is asked again and the revoked key refused
    assert seen == [alice] * 9 and asked == [100.0]
    now[0] = 101.0
    assert cached(token) is None
    assert asked == [100.0, 101.0]
