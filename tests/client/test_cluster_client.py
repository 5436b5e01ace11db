"""The client on a cluster: kudu-python's ``connect(host, port)`` forms and credentials,
the tablet servers listed, and what a cluster refuses (soft delete and recall, JWTs,
another database kind's scan tokens). The common API runs on both kinds through the
``ON_BOTH`` tests of this package."""

from __future__ import annotations

from pathlib import Path

import pytest

import kudusql.client as kudu
from kudusql.cluster.client.target import SECRET_FILE_ENV
from kudusql.common.errors import OperationalError, ProgrammingError
from tests.client.conftest import simple_schema
from tests.support.targets import empty


def _parts(url: str) -> tuple[str, int, str]:
    address, _, query = url.removeprefix("kudusql://").partition("?")
    host, port = address.rsplit(":", 1)
    return host, int(port), query.removeprefix("secret_file=")


def test_connect_forms_and_credentials(
    sql_cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty(sql_cluster_url)
    host, port, secret_file = _parts(sql_cluster_url)
    with kudu.connect([host], [port], secret_file=secret_file, rpc_timeout_ms=20_000) as c:
        assert c.is_cluster and not c.is_multimaster
        c.create_table("t", simple_schema())
        servers = c.list_tablet_servers()
        assert len(servers) == 3 and all(s.hostname() == "127.0.0.1" for s in servers)
        assert len({s.uuid() for s in servers}) == 3 and all(s.port() > 0 for s in servers)
    with kudu.connect(sql_cluster_url) as c:  # the URL carries the secret file
        assert c.list_tables() == ["t"]
    monkeypatch.setenv(SECRET_FILE_ENV, secret_file)
    with kudu.connect(host, port, require_authentication=True) as c:
        assert c.table_exists("t")
    monkeypatch.delenv(SECRET_FILE_ENV)
    with pytest.raises(OperationalError):
        kudu.connect(host, port)  # no secret: the master refuses the call
    with pytest.raises(kudu.KuduNotSupported, match="shared secret"):
        kudu.connect(host, port, secret_file=secret_file, jwt="token")
    with pytest.raises(kudu.KuduNotSupported, match="needs TLS"):
        kudu.connect(
            host, port, secret_file=secret_file, encryption_policy=kudu.ENCRYPTION_REQUIRED
        )
    with pytest.raises(ValueError, match="give one port, not 2"):
        kudu.connect(host, [port, port])
    with pytest.raises(ValueError, match="unknown option"):
        kudu.connect(host, port, secret_file=secret_file, read_only=True)


@pytest.mark.parametrize("client_kind", ["cluster"], indirect=True)
def test_cluster_refuses_soft_delete_and_recall(client: kudu.Client, tmp_path: Path) -> None:
    t = client.create_table("t", simple_schema())
    t.insert_arrow({"key": [1, 2]})
    with pytest.raises(kudu.KuduNotSupported, match="soft delete"):
        client.delete_table("t", reserve_seconds=60)
    with pytest.raises(kudu.KuduNotSupported, match="recall"):
        client.recall_table(t.id)
    assert client.list_soft_deleted_tables() == [] and client.list_tables() == ["t"]
    client.soft_delete_table("t")  # no reserve time: dropped at once, as in Kudu
    assert client.list_tables() == []
    # scan tokens are per database kind: an embedded one is refused with its reason
    with kudu.connect(str(tmp_path / "db"), maintenance=False) as local:
        lt = local.create_table("t", simple_schema())
        blob = lt.scan_token_builder().build()[0].serialize()
        with pytest.raises(ProgrammingError, match="planned on an embedded database"):
            client.deserialize_token_into_scanner(blob)
        t2 = client.create_table("t2", simple_schema())
        remote = t2.scan_token_builder().build()[0].serialize()
        with pytest.raises(ProgrammingError, match="planned on a cluster"):
            local.deserialize_token_into_scanner(remote)
    # a token names the tablet, its tablet server, the snapshot and the projection
    tok = t2.scan_token_builder().set_projected_column_names(["key"]).build()[0]
    assert b'"kind":"cluster"' in tok.serialize() and b'"tserver":"127.0.0.1:' in tok.serialize()
    client.delete_table("t2")
    with pytest.raises(ProgrammingError, match="was dropped"):
        client.deserialize_token_into_scanner(tok.serialize()).read_all_tuples()
