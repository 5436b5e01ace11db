"""Owns the ``kudusql`` command line: arguments, opening the database, choosing the
interactive shell or a non-interactive run (``-c``, ``-f``, standard input), and the
exit code.

Exit codes: 0 when every statement succeeded, 1 when one failed (a script stops at the
first failure), 2 for bad arguments or a database that cannot be opened, 130 after
Ctrl-C in a non-interactive run.

The arguments are parsed before anything heavy is imported: this module imports only the
standard library at its top, so ``--help``, ``--version`` and argument errors answer
without loading DuckDB, pyarrow, sqlglot, prompt_toolkit or the storage layers.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, TextIO

from kudusql import __version__
from kudusql.shell.formats import FORMATS

if TYPE_CHECKING:
    from kudusql.dbapi import Connection
    from kudusql.shell.core import Shell

DEFAULT_PATH = "kudusql-data"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="kudusql",
        description="kudusql SQL shell: opens (or creates) the database directory PATH. "
        "`kudusql master|tserver|cluster ...` run a cluster instead (each has --help).",
        epilog="Without -c/-f and with a terminal on standard input, starts the "
        "interactive shell; otherwise runs SQL from standard input.",
    )
    ap.add_argument(
        "path",
        nargs="?",
        default=DEFAULT_PATH,
        metavar="PATH",
        help=f"database directory (default: ./{DEFAULT_PATH}, created on first use), or "
        "a cluster's master as kudusql://HOST:PORT",
    )
    ap.add_argument(
        "-c",
        "--command",
        action="append",
        metavar="SQL",
        help="run SQL (statements and meta commands) and exit; may be repeated",
    )
    ap.add_argument("-f", "--file", action="append", metavar="FILE", help="run a SQL file and exit")
    ap.add_argument("--format", choices=FORMATS, default="table", help="output format")
    ap.add_argument("-o", "--output", metavar="FILE", help="write results to FILE")
    ap.add_argument("--read-only", action="store_true", help="open the database read-only")
    ap.add_argument(
        "--secret-file",
        metavar="FILE",
        help="the cluster secret for a kudusql:// connection (default: $KUDUSQL_SECRET_FILE)",
    )
    ap.add_argument("--timing", action="store_true", help="show elapsed time per statement")
    ap.add_argument("--vi", action="store_true", help="vi editing mode")
    ap.add_argument(
        "--no-maintenance",
        action="store_true",
        help="no background flushes and compactions",
    )
    ap.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")
    ap.add_argument("--version", action="version", version=f"kudusql {__version__}")
    return ap


def _open(args: argparse.Namespace, err: TextIO) -> Connection | None:
    import kudusql
    from kudusql.shell import errors

    path = args.path
    cluster = path.lower().startswith("kudusql://")
    if cluster and (args.read_only or args.no_maintenance):
        err.write("Error: --read-only and --no-maintenance are for a database directory\n")
        return None
    if not cluster and args.secret_file:
        err.write("Error: --secret-file is for a kudusql://HOST:PORT connection\n")
        return None
    if args.read_only and not os.path.isdir(path):
        err.write(f"Error: no database at {path} to open read-only\n")
        return None
    try:
        if cluster:
            return kudusql.connect(path, secret_file=args.secret_file)
        options: dict[str, bool] = {"read_only": args.read_only}
        if args.no_maintenance:
            options["maintenance"] = False
        return kudusql.connect(path, **options)
    except Exception as e:
        err.write(errors.describe(e, debug=args.debug) + "\n")
        return None


class _Warnings(logging.Formatter):
    """Log records as the shell shows them: ``Warning: message``, no traceback unless
    ``--debug``."""

    def __init__(self, debug: bool) -> None:
        super().__init__("%(levelname)s: %(message)s")
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        record.levelname = record.levelname.capitalize()
        if not self.debug:
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        return super().format(record)


def _show_warnings(err: TextIO, debug: bool) -> None:
    """The library logs (and prints nothing itself); the shell, an application, shows
    its warnings and errors on standard error."""
    handler = logging.StreamHandler(err)
    handler.setLevel(logging.DEBUG if debug else logging.WARNING)
    handler.setFormatter(_Warnings(debug))
    logger = logging.getLogger("kudusql")
    logger.addHandler(handler)
    if debug:
        logger.setLevel(logging.DEBUG)


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    if raw and raw[0] in ("master", "tserver", "cluster"):
        # The cluster's daemons and ``cluster start|stop|status`` (kudusql.cluster.commands).
        from kudusql.cluster.commands import main as cluster_main

        return cluster_main(raw)
    args = parser().parse_args(argv)
    from kudusql.shell import errors
    from kudusql.shell.core import Settings, Shell

    out, err = sys.stdout, sys.stderr
    _show_warnings(err, args.debug)
    conn = _open(args, err)
    if conn is None:
        return 2
    scripted = bool(args.command or args.file) or not sys.stdin.isatty()
    settings = Settings(format=args.format, timing=args.timing)
    if not scripted:
        settings.timing = True
        settings.expanded = "auto"
        settings.maxrows = 1000
    shell = Shell(
        conn,
        out,
        err,
        interactive=not scripted,
        settings=settings,
        debug=args.debug,
        path=args.path,
    )
    try:
        if args.output:
            shell.output.set_file(args.output)
        if scripted:
            return _batch(shell, args)
        return _interactive(shell, args)
    except OSError as e:
        err.write(errors.describe(e, debug=args.debug) + "\n")
        return 1
    finally:
        shell.close()


def _batch(shell: Shell, args: argparse.Namespace) -> int:
    from kudusql.shell.errors import Quit

    try:
        for sql in args.command or []:
            if not shell.run_text(sql):
                return 1
        for name in args.file or []:
            with open(name, encoding="utf-8") as f:
                text = f.read()
            if not shell.run_text(text, source=name):
                return 1
        if (
            not args.command
            and not args.file
            and not shell.run_text(sys.stdin.read(), source="<stdin>")
        ):
            return 1
    except Quit:
        return 1 if shell.failed else 0
    except KeyboardInterrupt:
        shell.output.error("Cancelled.")
        return 130
    return 0


def _interactive(shell: Shell, args: argparse.Namespace) -> int:
    from kudusql.shell.repl import Repl, welcome

    # Ctrl-C cancels the running statement (a KeyboardInterrupt in the main thread).
    # A process started with SIGINT ignored (from a background job of a shell without
    # job control, as `cmd &` in a script) keeps it ignored, and Python then installs
    # no handler: Ctrl-C did nothing. As psql does, the interactive shell takes SIGINT
    # whatever it inherited.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    shell.output.status(welcome(shell))
    Repl(shell, vi=args.vi).loop()
    return 0
