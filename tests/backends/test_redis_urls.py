"""``CRONWAVE_REDIS_URL``'s forms (``cronwave_core.redis_urls``): what each means, and a
clear refusal naming the variable and the rule for one that cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronwave_core.errors import ConfigurationError
from cronwave_core.redis_urls import SENTINEL_PORT, parse
from cronwave_core.settings import RedisSettings


def test_a_rediss_url_passes_redis_pys_own_tls_options(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-")
    target = parse(f"rediss://:pw@redis.example:6380/2?ssl_ca_certs={ca}&ssl_check_hostname=false")
    assert (target.tls, target.sentinel, target.db, target.password) == (True, False, 2, "pw")
    assert target.tls_options == {"ssl_ca_certs": str(ca), "ssl_check_hostname": False}


def test_a_sentinel_url_names_its_sentinels_service_and_database() -> None:
    target = parse("redis+sentinel://app:s%40cret@s1:26380,s2,[::1]:26381/billing/3")
    assert target.sentinels == (("s1", 26380), ("s2", SENTINEL_PORT), ("::1", 26381))
    assert (target.service, target.db, target.username, target.password) == (
        "billing",
        3,
        "app",
        "s@cret",
    )
    assert not target.tls
    assert parse("rediss+sentinel://s1/billing").tls


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://h:6379/0?max_connections=1000", "query parameter 'max_connections'"),
        ("redis://h:6379/0?ssl_ca_certs=/etc/hostname", "ssl_ca_certs is a TLS option"),
        ("rediss://h:6379/0?ssl_ca_certs=/nowhere/ca.pem", "ssl_ca_certs: no file /nowhere"),
        ("rediss://h:6379/0?ssl_cert_reqs=maybe", "ssl_cert_reqs must be required or"),
        ("rediss://h:6379/0?ssl_keyfile=/etc/hostname", "ssl_keyfile needs ssl_certfile"),
        ("redis://h:99999/0", "the port must be a whole number"),
        ("redis://h:6379/zero", "the database must be a whole number"),
        ("redis+sentinel://s1:26379", "names the master's service"),
        ("redis+sentinel://s1:port/mymaster", "sentinel s1: the port"),
        ("redis+sentinel://s1/a/b/c", "/SERVICE or /SERVICE/DB"),
        ("sentinel://s1/mymaster", "the scheme must be one of"),
    ],
)
def test_a_url_that_cannot_work_stops_start_up_naming_the_variable_and_the_rule(
    url: str, says: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        RedisSettings.from_env({"CRONWAVE_REDIS_URL": url})
    message = str(refused.value)
    assert message.startswith("CRONWAVE_REDIS_URL: expected redis://HOST:PORT/DB"), message
    assert says in message, message


def test_a_refused_urls_password_is_not_shown() -> None:
    with pytest.raises(ConfigurationError) as refused:
        RedisSettings.from_env({"CRONWAVE_REDIS_URL": "redis+sentinel://:hunter22@s1:26379"})
    assert "hunter22" not in str(refused.value)
    assert "names the master's service" in str(refused.value)
