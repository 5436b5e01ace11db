"""A test-only cluster server in its own process, for the RPC tests and the benchmark.

``python -m tests.cluster.rpc_test_server --bind 127.0.0.1:0 --port-file F
[--secret-file S] [--tls-dir D]`` serves the base ping plus a few calls that exercise
the machinery: a call with a side effect (``record``) and its count (``recorded``),
calls that fail (``fail``: a kudusql error, or a bug), a slow call, and a named table
put with do_put and read back with do_get. It writes its port to the port file once it
listens, logs to stderr, and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from kudusql.cluster.messages import Request, Response, message
from kudusql.cluster.rpc_server import RpcServer
from kudusql.cluster.security import TlsFiles, read_secret_file
from kudusql.common.errors import ProgrammingError


@message("test_count")
@dataclass(frozen=True)
class Count(Response):
    count: int


@message("test_record")
@dataclass(frozen=True)
class Record(Request):
    """Appends a note: a side effect, so not idempotent."""

    RESPONSE: ClassVar[type[Response]] = Count
    note: str


@message("test_recorded")
@dataclass(frozen=True)
class Recorded(Request):
    RESPONSE: ClassVar[type[Response]] = Count
    IDEMPOTENT: ClassVar[bool] = True


@message("test_fail")
@dataclass(frozen=True)
class Fail(Request):
    """``how``: "programming" raises a ProgrammingError, "bug" a ZeroDivisionError."""

    RESPONSE: ClassVar[type[Response]] = Count
    how: str


@message("test_sleep")
@dataclass(frozen=True)
class Sleep(Request):
    RESPONSE: ClassVar[type[Response]] = Count
    seconds: float


@message("test_put_table")
@dataclass(frozen=True)
class PutTable(Request):
    RESPONSE: ClassVar[type[Response]] = Count
    name: str


@message("test_get_table")
@dataclass(frozen=True)
class GetTable(Request):
    RESPONSE: ClassVar[type[Response]] = Count
    IDEMPOTENT: ClassVar[bool] = True
    name: str


class DemoServer(RpcServer):
    def __init__(self, bind: str, secret: str | None, tls: TlsFiles | None) -> None:
        super().__init__(bind, kind="tablet server", secret=secret, tls=tls)
        self.notes: list[str] = []
        self.tables: dict[str, pa.Table] = {}
        self.register_action(Record, self.record)
        self.register_action(Recorded, lambda r: Count(len(self.notes)))
        self.register_action(Fail, self.fail)
        self.register_action(Sleep, self.sleep)
        self.register_put(PutTable, self.put_table)
        self.register_get(GetTable, self.get_table)

    def record(self, request: Record) -> Count:
        self.notes.append(request.note)
        return Count(len(self.notes))

    def fail(self, request: Fail) -> Count:
        if request.how == "programming":
            raise ProgrammingError("table 'nope' does not exist")
        return Count(1 // 0)

    def sleep(self, request: Sleep) -> Count:
        time.sleep(request.seconds)
        return Count(0)

    def put_table(self, request: PutTable, batches: pa.RecordBatchReader) -> Count:
        table = batches.read_all()
        self.tables[request.name] = table
        return Count(table.num_rows)

    def get_table(self, request: GetTable) -> pa.Table:
        if request.name not in self.tables:
            raise ProgrammingError(f"no table {request.name!r}")
        return self.tables[request.name]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bind", default="127.0.0.1:0")
    p.add_argument("--port-file", required=True)
    p.add_argument("--secret-file")
    p.add_argument("--tls-dir")
    args = p.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    secret = read_secret_file(args.secret_file) if args.secret_file else None
    tls = None
    if args.tls_dir:
        tls = TlsFiles(Path(args.tls_dir) / "server.crt", Path(args.tls_dir) / "server.key")
    server = DemoServer(args.bind, secret, tls)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    tmp = args.port_file + ".tmp"
    Path(tmp).write_text(str(server.port))
    os.replace(tmp, args.port_file)
    server.serve()


if __name__ == "__main__":
    main()
