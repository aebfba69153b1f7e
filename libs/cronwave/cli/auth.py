"""``cronwave auth ...``: API keys (created, listed, revoked; admins only) and
certificates from the suite's local CA."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import Annotated, Any

import typer
from cronwave_proto.v1 import api_key_service_pb2 as keys_pb
from rich.table import Table

from cronwave.cli import _json
from cronwave.cli._console import err, fail, out, reported_errors, server_modules, tls_settings
from cronwave.cli._json import Output, OutputOption
from cronwave.cli._render import fmt_time
from cronwave.cli._stub import StoreStub, store_stub

app = typer.Typer(
    help="API keys (viewer, operator, admin) and certificates of the suite's CA.",
    no_args_is_help=True,
)

ROLES = ("viewer", "operator", "admin")


@contextmanager
def _keys() -> Iterator[StoreStub[Any]]:
    from cronwave_proto.v1 import api_key_service_pb2_grpc as keys_grpc

    with store_stub(keys_grpc.ApiKeyServiceStub) as store:
        yield store


def _key_json(key: keys_pb.ApiKey) -> dict[str, Any]:
    return {
        "key_id": key.key_id,
        "name": key.name,
        "role": key.role,
        "created_at": key.created_at.ToDatetime(tzinfo=UTC).isoformat(),
        "created_by": key.created_by,
        "revoked_at": (
            key.revoked_at.ToDatetime(tzinfo=UTC).isoformat()
            if key.HasField("revoked_at")
            else None
        ),
    }


@app.command("create-key")
def create_key(
    name: Annotated[str, typer.Option("--name", help="Who the key is for, e.g. alice or ci.")],
    role: Annotated[str, typer.Option("--role", help="viewer | operator | admin.")],
    output: OutputOption = Output.TABLE,
) -> None:
    """Create an API key and print its token, once: the store keeps only its hash.
    Callers send it as CRONWAVE_TOKEN (with a certificate of the suite's CA, e.g.
    <data dir>/tls/client.pem)."""
    with _keys() as store:
        reply = store.call(
            store.stub.CreateApiKey, keys_pb.CreateApiKeyRequest(name=name, role=role)
        )
    if output is Output.JSON:
        _json.emit({**_key_json(reply.key), "token": reply.token})
        return
    out().print(f"API key {reply.key.key_id} for {reply.key.name} ({reply.key.role}):")
    out().print(reply.token, soft_wrap=True, markup=False, highlight=False)
    err().print("This is the only time the token is shown; keep it in a secret store.")


@app.command("list-keys")
def list_keys(
    all_: Annotated[bool, typer.Option("--all", help="Include revoked keys.")] = False,
    output: OutputOption = Output.TABLE,
) -> None:
    """List the API keys (never their tokens)."""
    with _keys() as store:
        reply = store.call(store.stub.ListApiKeys, keys_pb.ListApiKeysRequest(include_revoked=all_))
    if output is Output.JSON:
        _json.emit([_key_json(k) for k in reply.keys])
        return
    if not reply.keys:
        out().print("no API keys; create one with `cronwave auth create-key`")
        return
    table = Table(title="API keys", title_justify="left")
    for column in ("key id", "name", "role", "created", "by", "revoked"):
        table.add_column(column, no_wrap=True)
    for key in reply.keys:
        revoked = (
            fmt_time(key.revoked_at.ToDatetime(tzinfo=UTC)) if key.HasField("revoked_at") else "-"
        )
        table.add_row(
            key.key_id,
            key.name,
            key.role,
            fmt_time(key.created_at.ToDatetime(tzinfo=UTC)),
            key.created_by,
            revoked,
        )
    out().print(table)


@app.command("revoke-key")
def revoke_key(
    key_id: Annotated[str, typer.Argument(help="The key's id (`cronwave auth list-keys`).")],
) -> None:
    """Revoke an API key: every service refuses it within CRONWAVE_AUTH_CACHE_TTL."""
    with _keys() as store:
        reply = store.call(store.stub.RevokeApiKey, keys_pb.RevokeApiKeyRequest(key_id=key_id))
    out().print(f"API key {reply.key.key_id} ({reply.key.name}) revoked")


@app.command("issue-cert")
def issue_cert(
    name: Annotated[str, typer.Argument(help="Who the certificate is for, e.g. alice.")],
    role: Annotated[
        str | None,
        typer.Option("--role", help="viewer | operator | admin; none: it needs an API key."),
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for NAME.pem and NAME-key.pem.")
    ] = Path("."),
) -> None:
    """Issue a client certificate from the suite's local CA (<data dir>/tls): with a
    role it is a caller of its own; without one it only connects, and its calls carry
    an API key."""
    if role is not None and role not in ROLES:
        fail(f"--role must be one of {', '.join(ROLES)}, got {role!r}")
    with server_modules("cronwave auth issue-cert", ("cryptography",)):
        from cronwave_core.security.pki import LocalCA, client_uri, user_uri, write_pair
    with reported_errors():
        tls_dir = tls_settings().tls_dir
        if not (tls_dir / "ca-key.pem").exists():
            fail(
                f"no local CA in {tls_dir}",
                "`cronwave up` creates it; with another CA, issue certificates with it",
            )
        ca = LocalCA(tls_dir)
        uri = user_uri(name) if role else client_uri(name)
        key, cert = ca.issue(uri, name, role=role)
        out_dir.mkdir(parents=True, exist_ok=True)
        files = write_pair(out_dir, name, key, cert, ca.cert_path)
    out().print(f"certificate {files.cert} and key {files.key} (CA: {files.ca})")
