"""cronwave_core.extensions: what an installed package adds joins cronwave's own tables
(settings, drills, identities, rules), and a malformed addition stops start-up, named."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from cronwave_core import extensions, settings
from cronwave_core.config import FromEnv, Integer, setting
from cronwave_core.errors import ConfigurationError
from cronwave_core.security import identity, rules
from cronwave_core.security.rules import rule


@dataclass(frozen=True, kw_only=True)
class _Drills(FromEnv):
    """A package's drill."""

    spill: int = setting("CRONWAVE_ACME_SPILL", Integer(0), 0, "spill N ledgers")


def _clear() -> None:
    for cached in (
        extensions.installed,
        identity.service_identities,
        rules.rule_table,
        settings.components,
        settings.test_only_variables,
    ):
        cached.cache_clear()


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[extensions.Extension]]:
    """The extensions the core sees: the installed ones, then what the test appends."""
    found = list(extensions.installed())
    _clear()
    monkeypatch.setattr(extensions, "installed", lambda: tuple(found))
    yield found
    monkeypatch.undo()
    _clear()


def test_the_billing_example_joins_through_its_extension() -> None:
    names = [cls.__name__ for cls in settings.components()]
    assert names.index("BillingDemoSettings") < names.index("TestHooks")
    assert names.index("BillingDrills") > names.index("TestHooks")
    assert "payment-gateway" in identity.service_identities()
    assert "payment-gateway" not in identity.SERVICE_IDENTITIES
    charge = rules.rule_table()["/cronwave_billing.v1.PaymentGatewayService/Charge"]
    assert charge.services == {"worker"} and charge.role is None


def test_a_package_s_identity_rule_and_drill_join_cronwave_s(
    installed: list[extensions.Extension],
) -> None:
    # Given a package with a server of its own, one rule and one drill
    installed.append(
        extensions.Extension(
            drills=(_Drills,),
            identities=("acme-ledger",),
            rules={"/acme.v1.Ledger/Post": rule("worker", "acme-ledger")},
        )
    )
    # Then its identity may read as cronwave's services do, its rule is in the table
    assert "acme-ledger" in identity.service_identities()
    reflect = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    reflection = rules.rule_table()[reflect]
    assert "acme-ledger" in reflection.services
    assert rules.rule_table()["/acme.v1.Ledger/Post"].services == {"worker", "acme-ledger"}
    # and its drill is refused without the switch, allowed with it
    with pytest.raises(ConfigurationError, match="CRONWAVE_ACME_SPILL set, but CRONWAVE_TEST"):
        settings.TestHooks.from_env({"CRONWAVE_ACME_SPILL": "1"})
    with pytest.raises(ConfigurationError, match="CRONWAVE_ACME_SPILL"):
        settings.TestHooks.from_env({"CRONWAVE_TEST_HOOKS": "0", "CRONWAVE_ACME_SPILL": "1"})
    assert settings.TestHooks.from_env({"CRONWAVE_TEST_HOOKS": "1", "CRONWAVE_ACME_SPILL": "1"})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"/cronwave.v1.WorkerService/GetWorkerStatus": rule("worker")}, "a second one"),
        ({"/acme.v1.Ledger/Post": "worker"}, "is str"),
        ({"/acme.v1.Ledger/Post": rule("acme-ledger")}, "names unknown services"),
    ],
)
def test_a_malformed_rule_of_a_package_stops_start_up_naming_it(
    installed: list[extensions.Extension], given: dict[str, object], message: str
) -> None:
    installed.append(extensions.Extension(rules=given))
    with pytest.raises(ConfigurationError, match=message) as caught:
        rules.rule_table()
    assert next(iter(given)) in caught.value.message
