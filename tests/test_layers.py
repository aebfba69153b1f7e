"""The layers hold: cronwave_core's domain modules do no I/O (they import nothing of
the infrastructure), no library imports a service, the SDK's job API imports nothing
heavy, and the examples (job packages, such as the billing demo's) are the SDK's and
the core's users: they import no service, and no library imports them (the demo
command only looks for the billing example and starts its processes by name). In the
workflow-store, the parts beside ``Store`` (the deadline sweep, the notifier and its
relay and outbox, the slot rules) and the repositories it holds (audit, requeues,
dead letters, deadlines) reach it only through the narrow ports they are given: they import neither
``Store`` nor the ``StoreCore`` its mixins share, and ``Store`` inherits none of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBS = ROOT / "libs"
DOMAIN = LIBS / "cronwave_core" / "domain"
#: What a domain module may import of cronwave_core outside the domain: values only.
VALUE_MODULES = {"errors", "fields", "proto_enum", "wire"}
#: Infrastructure a domain module must not reach, directly.
INFRASTRUCTURE = ("grpc", "redis", "sqlalchemy", "dramatiq", "psycopg", "opentelemetry")
SERVICES = {p.name.replace("-", "_") for p in (ROOT / "services").iterdir() if p.is_dir()}
EXAMPLES = ROOT / "examples"
#: The top-level packages of the examples (examples/<example>/<package>/).
EXAMPLE_PACKAGES = {
    p.name for p in EXAMPLES.glob("*/*") if p.is_dir() and (p / "__init__.py").exists()
}
STORE_PACKAGE = ROOT / "services" / "workflow-store" / "workflow_store"
#: The workflow-store's modules that stand beside ``Store`` or are held by it, each over
#: the narrow port or the database it is given (docs/architecture.md, *The store's
#: parts*).
BESIDE_THE_STORE = (
    "audit_rpc",
    "audit_store",
    "dead_letter_store",
    "deadline_rpc",
    "deadline_store",
    "deadline_sweep",
    "delivery_outbox",
    "delivery_relay",
    "notifier",
    "slots",
    "sweep_store",
)
#: The repositories ``Store`` holds as attributes rather than inherits.
HELD_BY_THE_STORE = {"AuditLog", "DeadLetters", "DeadlineStore", "Requeues"}
#: What is never a base of ``Store``: the parts it holds, and those beside it.
NOT_THE_STORES_BASES = {
    *HELD_BY_THE_STORE,
    "AuditStore",
    "DeadLetterStore",
    "DeliveryOutbox",
    "DeadlineSweep",
    "DeliveryRelay",
    "Notifications",
}
#: The job author's API: what a job module imports, in the worker and in its own tests.
JOB_API = [
    LIBS / "cronwave" / f"{name}.py"
    for name in ("_job", "_job_context", "_job_errors", "_checkpoint", "_retry")
]
#: What the job API may import of cronwave_core: values with no I/O (a job's progress
#: is one; its proto conversion loads the messages only when the worker sends it; the
#: backoff formula a retry policy's delays come from is another).
JOB_API_CORE = {
    "cronwave_core.backoff",
    "cronwave_core.errors",
    "cronwave_core.fields",
    "cronwave_core.limits",
    "cronwave_core.domain.progress",
}


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (a function's imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _crossings(path: Path) -> list[str]:
    """The imports of ``path`` that leave the domain, by module or package reached."""
    wrong: set[str] = set()
    for name in _imported(path):
        top, _, rest = name.partition(".")
        if top in INFRASTRUCTURE or top in ("cronwave", "cronwave_bench", "cronwave_waterfall"):
            wrong.add(top)
        elif top == "cronwave_core" and rest:
            first = rest.split(".")[0]
            if first != "domain" and first not in VALUE_MODULES:
                wrong.add(f"cronwave_core.{first}")
    return sorted(wrong)


@pytest.mark.parametrize("path", sorted(DOMAIN.glob("*.py")), ids=lambda p: p.name)
def test_a_domain_module_imports_no_infrastructure(path: Path) -> None:
    assert _crossings(path) == [], f"{path.relative_to(ROOT)} reaches past the domain"


def test_the_check_sees_a_crossing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from cronwave_core.rpc import open_channel\nimport redis\n"
        "def f():\n    from cronwave_core.telemetry.spans import hop_span\n"
    )
    assert _crossings(bad) == ["cronwave_core.rpc", "cronwave_core.telemetry", "redis"]


def test_no_library_imports_a_service() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted(LIBS.rglob("*.py"))
        if "cronwave_proto" not in path.parts
        for name in sorted(_imported(path))
        if name.split(".")[0] in SERVICES
    ]
    assert found == []


@pytest.mark.parametrize("path", JOB_API, ids=lambda p: p.name)
def test_the_job_api_imports_nothing_heavy(path: Path) -> None:
    heavy = sorted(
        name
        for name in _imported(path)
        if name.split(".")[0] in (*INFRASTRUCTURE, "grpc", "cronwave_proto")
        or (
            name.startswith("cronwave_core")
            and not any(name == core or name.startswith(core + ".") for core in JOB_API_CORE)
        )
    )
    assert heavy == [], f"{path.relative_to(ROOT)} imports more than the job API needs"


def test_no_library_imports_an_example_and_no_example_a_service() -> None:
    assert {"cronwave_billing"} <= EXAMPLE_PACKAGES
    libs_to_examples = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted(LIBS.rglob("*.py"))
        for name in sorted(_imported(path))
        if name.split(".")[0] in EXAMPLE_PACKAGES
    ]
    examples_to_services = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted(EXAMPLES.rglob("*.py"))
        for name in sorted(_imported(path))
        if name.split(".")[0] in SERVICES
    ]
    assert (libs_to_examples, examples_to_services) == ([], [])


def _reaches_the_store(path: Path) -> list[str]:
    """The imports of ``path`` that reach the whole store or its mixins' shared base."""
    whole = (
        "workflow_store.store",
        "workflow_store.store.Store",
        "workflow_store.store_core.StoreCore",
    )
    return sorted(name for name in _imported(path) if name in whole)


@pytest.mark.parametrize("name", BESIDE_THE_STORE)
def test_a_part_beside_the_store_imports_no_store(name: str) -> None:
    path = STORE_PACKAGE / f"{name}.py"
    assert _reaches_the_store(path) == [], f"{path.relative_to(ROOT)} reaches the whole store"


def test_the_check_sees_a_part_reaching_the_store(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from workflow_store.store_core import StoreCore, utc_now\n"
        "def f():\n    from workflow_store.store import Store\n"
    )
    assert _reaches_the_store(bad) == [
        "workflow_store.store",
        "workflow_store.store.Store",
        "workflow_store.store_core.StoreCore",
    ]


def test_the_store_holds_its_repositories_rather_than_inheriting_them() -> None:
    tree = ast.parse((STORE_PACKAGE / "store.py").read_text())
    (store,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store"]
    bases = {base.id for base in store.bases if isinstance(base, ast.Name)}
    held = {
        node.value.func.id
        for node in ast.walk(store)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
    }
    assert bases and not bases & NOT_THE_STORES_BASES
    assert held == HELD_BY_THE_STORE
