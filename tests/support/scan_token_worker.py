"""Run one serialized scan token in this process and write its rows as an Arrow IPC
stream (for tests: a process other than the writer's, as a Spark task would be).

    python -m tests.support.scan_token_worker TOKEN_FILE OUT_FILE

``ScanToken.execute()`` opens the database read-only. Exit status 0 on success; on a
kudusql error, ``<ErrorClass>: <message>`` on stderr and exit status 3.
"""

from __future__ import annotations

import sys

import pyarrow as pa

from kudusql.common.errors import Error
from kudusql.storage.tables.scan_token import ScanToken


def main(argv: list[str]) -> int:
    token_path, out_path = argv
    with open(token_path, "rb") as f:
        token = ScanToken.deserialize(f.read())
    try:
        reader = token.execute()
        with pa.OSFile(out_path, "wb") as sink, pa.ipc.new_stream(sink, reader.schema) as w:
            for batch in reader:
                w.write_batch(batch)
    except Error as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
