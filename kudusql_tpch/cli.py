"""``python -m kudusql_tpch`` / ``kudusql-tpch``: the TPC-H benchmark runner.

Commands (each updates ``<out>/sf<N>/results.json``; ``all`` runs them in order):

- ``generate``  Parquet files from tpchgen-cli, cached in ``<data-dir>/sf<N>``
- ``load``      Kudu-style tables in ``--db`` (``--loader spark`` or ``arrow``), and
                DuckDB's native load of the same files for comparison
- ``run``       the 22 queries on kudusql: warm-up, repetitions, median per query
- ``check``     every answer against DuckDB over the same Parquet files
- ``compare``   kudusql, DuckDB over Parquet and DuckDB native tables, interleaved
- ``micro``     the Kudu paper's Table 2 micro-queries on the three
- ``mutate``    UPDATE/DELETE a slice of lineitem and orders, run and check again with
                deltas and after compaction
- ``report``    ``report.md`` and ``report.png`` from the results file

Exit status: 0 when every answer was right, 1 on a wrong answer or a failed query
(each named with its first difference), 2 when something must be set up first.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from kudusql.dbapi import Connection
from kudusql.shell.tpch import cache_dir
from kudusql_tpch import progress, results
from kudusql_tpch.errors import TpchError, WrongAnswers
from kudusql_tpch.generate import (
    data_path,
    default_data_dir,
    default_results_dir,
    generate_tpch,
    parquet_rows,
)
from kudusql_tpch.load import (
    buckets,
    duck_native_timed,
    duck_parquet,
    load,
)
from kudusql_tpch.load import open_loaded as _open_loaded
from kudusql_tpch.micro import micro_queries
from kudusql_tpch.mutation import run_mutation
from kudusql_tpch.progress import log
from kudusql_tpch.report import format_seconds, write_report
from kudusql_tpch.run import (
    DUCK_NATIVE,
    DUCK_PARQUET,
    KUDUSQL,
    SYSTEM_LABELS,
    Suite,
    duck_runner,
    kudusql_runner,
    run_suite,
)
from kudusql_tpch.spec import TPCH_KEYS, load_queries, parse_query_list, query_name, sf_label

COMMANDS = ("generate", "load", "run", "check", "compare", "micro", "mutate", "report", "all")


# -- arguments --------------------------------------------------------------------------------


def _prog() -> str:
    """How the runner was started, for its usage line: the ``kudusql-tpch`` script or
    ``python -m kudusql_tpch``."""
    return "kudusql-tpch" if Path(sys.argv[0]).stem == "kudusql-tpch" else "python -m kudusql_tpch"


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("common options")
    g.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    g.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"Parquet cache, files in <dir>/sf<N>/ (default {default_data_dir()})",
    )
    g.add_argument(
        "--db",
        type=Path,
        default=None,
        help=f"kudusql database (default {cache_dir()}/tpch-sf<N>.kudusql)",
    )
    g.add_argument(
        "--cluster",
        metavar="HOST:PORT",
        default=None,
        help="run against the cluster whose master is HOST:PORT instead of --db (its secret "
        "from $KUDUSQL_SECRET_FILE); load with --loader arrow",
    )
    g.add_argument(
        "--loader",
        choices=("spark", "arrow"),
        default="spark",
        help="spark: the Spark pipeline (default); arrow: direct Arrow batches, no Spark",
    )
    g.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    g.add_argument("--repetitions", type=int, default=3, help="timed runs per query (default 3)")
    g.add_argument("--warmup", type=int, default=1, help="untimed runs per query (default 1)")
    g.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"results directory (default {default_results_dir()})",
    )
    g.add_argument("--queries", default=None, help="a subset of the 22, e.g. 1,3,5-7")
    g.add_argument(
        "--cores",
        type=int,
        default=None,
        help="cores the bucket rule assumes (default: this machine's)",
    )
    g.add_argument(
        "--mutate-percent",
        type=float,
        default=5.0,
        help="share of lineitem and orders the mutation phase updates, and deletes (default 5)",
    )
    g.add_argument("--keep", action="store_true", help="mutate: keep the mutated copies")
    g.add_argument(
        "--baseline", type=Path, default=None, help="report: a results.json to compare with"
    )
    g.add_argument("--fail-fast", action="store_true", help="stop at the first wrong answer")
    g.add_argument("--quiet", action="store_true", help="no progress bars or status lines")
    g.add_argument("--debug", action="store_true", help="tracebacks for errors")
    p = argparse.ArgumentParser(
        prog=_prog(),
        description="TPC-H benchmark runner for kudusql: generate, load, run, check, "
        "compare with DuckDB, report.",
        epilog="Example: python -m kudusql_tpch all --sf 1 --loader arrow",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    helps = {
        "generate": "generate the Parquet files with tpchgen-cli (cached)",
        "load": "load the tables into --db (and time DuckDB's native load)",
        "run": "time the 22 queries on kudusql",
        "check": "check every answer against DuckDB over the same Parquet files",
        "compare": "time kudusql, DuckDB/Parquet and DuckDB native side by side",
        "micro": "the Kudu paper's Table 2 micro-queries",
        "mutate": "UPDATE/DELETE a slice, run and check with deltas and after compaction",
        "report": "write report.md and report.png from the results file",
        "all": "everything above, in order",
    }
    for c in COMMANDS:
        sub.add_parser(c, parents=[common], help=helps[c], description=helps[c])
    return p


@dataclass
class Context:
    """What a command needs, resolved from the arguments."""

    args: argparse.Namespace
    sf: float
    src: Path
    #: The database directory, or a cluster's ``kudusql://HOST:PORT``.
    db: Path | str
    out: Path
    queries: dict[str, str]
    progress: bool
    failures: list[str] = field(default_factory=list)

    @property
    def results_file(self) -> Path:
        return results.results_dir(self.out, self.sf) / "results.json"

    def settings(self) -> dict[str, Any]:
        a = self.args
        return {
            "sf": self.sf,
            "loader": a.loader,
            "repetitions": a.repetitions,
            "warmup": a.warmup,
            "queries": list(self.queries),
            "data_dir": str(self.src),
            "db": str(self.db),
            "cores_for_buckets": a.cores,
            "buckets": {t: buckets(t, self.sf, a.cores) or 1 for t in TPCH_KEYS},
            "spark_master": a.master if a.loader == "spark" else None,
            "mutate_percent": a.mutate_percent,
        }

    def save(self, **sections: Any) -> dict[str, Any]:
        return results.update(self.results_file, self.sf, self.settings(), **sections)

    def open_loaded(self, **options: Any) -> Connection:
        return _open_loaded(self.db, self.src, **options)

    def suite_failed(self, suite: Suite) -> None:
        """Record a phase's wrong answers; raise at once with --fail-fast."""
        fails = suite.failures()
        if fails:
            self.failures += [f"{suite.phase}: {f}" for f in fails]
            if self.args.fail_fast:
                raise WrongAnswers(suite.phase, fails)


def context(args: argparse.Namespace) -> Context:
    if args.sf <= 0:
        raise TpchError(f"--sf must be positive, got {args.sf:g}")
    if args.repetitions < 0 or args.warmup < 0:
        raise TpchError("--repetitions and --warmup must be >= 0")
    sf = args.sf
    data_dir = args.data_dir or default_data_dir()
    # Nothing goes into the working directory unasked: the database and the results
    # default to the kudusql cache, and the paths are shown.
    db: Path | str = args.db or cache_dir() / f"tpch-sf{sf_label(sf)}.kudusql"
    if args.cluster:
        if args.db is not None:
            raise TpchError("--cluster and --db name two databases: give one")
        if args.loader == "spark" and args.command in ("load", "all"):
            raise TpchError("loading a cluster takes --loader arrow")
        db = f"kudusql://{args.cluster}"
    out = args.out or default_results_dir()
    if args.db is None or args.out is None:
        log(f"database {db}, results in {out}")
    try:
        numbers = parse_query_list(args.queries) if args.queries else list(range(1, 23))
    except ValueError as e:
        raise TpchError(str(e)) from None
    texts = load_queries()
    queries = {query_name(i): texts[i] for i in numbers}
    return Context(args, sf, data_path(data_dir, sf), db, out, queries, not args.quiet)


# -- commands ---------------------------------------------------------------------------------
def cmd_generate(ctx: Context) -> None:
    generate_tpch(ctx.sf, ctx.src, progress=ctx.progress)
    rows = parquet_rows(ctx.src)
    print(f"TPC-H SF {sf_label(ctx.sf)} in {ctx.src}: {sum(rows.values()):,} rows")


def _ensure_data(ctx: Context) -> None:
    generate_tpch(ctx.sf, ctx.src, progress=ctx.progress)


def cmd_load(ctx: Context, native_path: Path | None = None) -> duckdb.DuckDBPyConnection | None:
    """Load kudusql, then time DuckDB's native load of the same files into
    ``native_path`` (a temporary file if None; then closed and removed). Returns the
    DuckDB connection when ``native_path`` was given."""
    _ensure_data(ctx)
    a = ctx.args
    log(f"loading TPC-H SF {sf_label(ctx.sf)} into {ctx.db} with the {a.loader} loader")
    res = load(
        a.loader, ctx.db, ctx.src, ctx.sf, cores=a.cores, master=a.master, progress=ctx.progress
    )
    section = res.to_json()
    section["db"] = str(ctx.db)
    with contextlib.ExitStack() as stack:
        path = native_path
        if path is None:
            path = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "native.duckdb"
        con: duckdb.DuckDBPyConnection | None
        con, native_s = duck_native_timed(ctx.src, path)
        section["duckdb_native_s"] = round(native_s, 3)
        section["ratio_vs_duckdb_native"] = round(res.seconds / native_s, 3)
        if native_path is None and con is not None:
            con.close()
            con = None
    ctx.save(load=section)
    print(
        f"loaded {section['rows']:,} rows in {format_seconds(res.seconds)} ({a.loader}); "
        f"DuckDB native load {format_seconds(native_s)}: "
        f"{section['ratio_vs_duckdb_native']:.2f}x"
    )
    return con


def _print_suite(suite: Suite) -> None:
    systems = suite.systems
    head = f"{'query':<20}" + "".join(f"{SYSTEM_LABELS.get(s, s):>16}" for s in systems)
    if len(systems) > 1:
        head += "".join(f"{'vs ' + SYSTEM_LABELS.get(s, s):>20}" for s in systems[1:])
    print(head)
    for name, o in suite.outcomes.items():
        meds = [o.median_ms(s) for s in systems]
        line = f"{name:<20}" + "".join(
            f"{'WRONG' if s in o.wrong else ('-' if m is None else f'{m:,.1f} ms'):>16}"
            for s, m in zip(systems, meds, strict=True)
        )
        k = meds[0]
        for m in meds[1:]:
            line += f"{(f'{k / m:.2f}x' if k and m else '-'):>20}"
        print(line)
    common = suite.common(systems)
    if common and suite.repetitions:
        geo = [suite.geomean(s, common) or 0.0 for s in systems]
        line = f"{'geomean':<20}" + "".join(f"{g:>13,.1f} ms" for g in geo)
        line += "".join(f"{geo[0] / g:>19.2f}x" for g in geo[1:] if g)
        print(line)


def cmd_run(ctx: Context) -> None:
    _ensure_data(ctx)
    conn = ctx.open_loaded()
    try:
        suite = run_suite(
            "run",
            {KUDUSQL: kudusql_runner(conn)},
            ctx.queries,
            repetitions=ctx.args.repetitions,
            warmup=ctx.args.warmup,
            sf1_rows=ctx.sf == 1,
            progress=ctx.progress,
            fail_fast=ctx.args.fail_fast,
        )
    finally:
        conn.close()
    ctx.save(run=suite.to_json())
    _print_suite(suite)
    ctx.suite_failed(suite)


def cmd_check(ctx: Context) -> None:
    _ensure_data(ctx)
    conn = ctx.open_loaded()
    parquet = duck_parquet(ctx.src)
    try:
        suite = run_suite(
            "check",
            {KUDUSQL: kudusql_runner(conn)},
            ctx.queries,
            repetitions=0,
            warmup=1,
            reference=(DUCK_PARQUET, duck_runner(parquet)),
            checked=[KUDUSQL],
            progress=ctx.progress,
            fail_fast=ctx.args.fail_fast,
        )
    finally:
        conn.close()
        parquet.close()
    ctx.save(check=suite.to_json())
    ok, n = suite.correct_count(KUDUSQL)
    print(f"check: {ok} of {n} answers equal to DuckDB's over the same Parquet files")
    ctx.suite_failed(suite)


@contextlib.contextmanager
def _native(
    ctx: Context, con: duckdb.DuckDBPyConnection | None = None
) -> Iterator[tuple[duckdb.DuckDBPyConnection, float | None]]:
    """DuckDB native tables: ``con`` if given, else built in a temporary file (and its
    load seconds)."""
    if con is not None:
        yield con, None
        return
    with tempfile.TemporaryDirectory(prefix="kudusql-tpch-") as d:
        native, seconds = duck_native_timed(ctx.src, Path(d) / "native.duckdb")
        try:
            yield native, seconds
        finally:
            native.close()


def _three(
    ctx: Context,
    phase: str,
    queries: dict[str, str],
    native: duckdb.DuckDBPyConnection,
    sf1_rows: bool,
) -> Suite:
    conn = ctx.open_loaded()
    parquet = duck_parquet(ctx.src)
    try:
        return run_suite(
            phase,
            {
                KUDUSQL: kudusql_runner(conn),
                DUCK_PARQUET: duck_runner(parquet),
                DUCK_NATIVE: duck_runner(native),
            },
            queries,
            repetitions=ctx.args.repetitions,
            warmup=ctx.args.warmup,
            reference=(DUCK_PARQUET, None),
            checked=[KUDUSQL, DUCK_NATIVE],
            sf1_rows=sf1_rows,
            progress=ctx.progress,
            fail_fast=ctx.args.fail_fast,
        )
    finally:
        conn.close()
        parquet.close()


def cmd_compare(ctx: Context, native: duckdb.DuckDBPyConnection | None = None) -> Suite:
    _ensure_data(ctx)
    with _native(ctx, native) as (con, seconds):
        suite = _three(ctx, "compare", ctx.queries, con, sf1_rows=ctx.sf == 1)
    section = suite.to_json()
    if seconds is not None:
        section["duckdb_native_load_s"] = round(seconds, 3)
    ctx.save(compare=section)
    _print_suite(suite)
    ctx.suite_failed(suite)
    return suite


def cmd_micro(ctx: Context, native: duckdb.DuckDBPyConnection | None = None) -> None:
    _ensure_data(ctx)
    queries = micro_queries(load_queries()[1])
    with _native(ctx, native) as (con, _):
        suite = _three(ctx, "micro", queries, con, sf1_rows=False)
    ctx.save(micro=suite.to_json())
    _print_suite(suite)
    ctx.suite_failed(suite)


def cmd_mutate(ctx: Context, native_path: Path | None = None, before: Suite | None = None) -> None:
    if not isinstance(ctx.db, Path):
        raise TpchError("mutate copies the database directory: it needs --db, not --cluster")
    _ensure_data(ctx)
    ctx.open_loaded().close()  # loaded and at this scale factor
    section, suites = run_mutation(
        ctx.db,
        ctx.src,
        ctx.queries,
        repetitions=ctx.args.repetitions,
        warmup=ctx.args.warmup,
        percent=ctx.args.mutate_percent,
        native_path=native_path,
        before=before,
        progress=ctx.progress,
        keep=ctx.args.keep,
    )
    ctx.save(mutation=section)
    for s in section["statements"]:
        print(f"{s['rows']:>10,} rows  {s['kudusql_s']:7.2f} s  {s['sql']}")
    print(f"flush + compaction of every table: {format_seconds(section['compaction_s'])}")
    for label, key in (("loaded", "before"), ("with deltas", "with_deltas")):
        _geo_line(label, section[key])
    _geo_line("after compaction", section["after_compaction"])
    for suite in suites:
        ctx.suite_failed(suite)


def _geo_line(label: str, sec: dict[str, Any]) -> None:
    geo = sec.get("geomean_ms", {})
    ans = sec.get("answers", {}).get(KUDUSQL)
    k, n = geo.get(KUDUSQL), geo.get(DUCK_NATIVE)
    text = f"{label:<18} kudusql geomean {k:,.1f} ms" if k else f"{label:<18} -"
    if n:
        text += f", DuckDB native {n:,.1f} ms"
    if ans:
        text += f"; {ans['correct']} of {ans['checked']} correct"
    print(text)


def cmd_report(ctx: Context) -> None:
    data = results.read(ctx.results_file)
    if not data:
        raise TpchError(f"no results in {ctx.results_file}: run a command first (e.g. all)")
    baseline = None
    if ctx.args.baseline is not None:
        baseline = results.read(ctx.args.baseline)
        if not baseline:
            raise TpchError(f"no results in the baseline {ctx.args.baseline}")
    paths = write_report(data, ctx.results_file.parent, baseline)
    print(f"report: {paths['markdown']}")
    if paths["chart"] is None:
        print("chart skipped: matplotlib is not installed (pip install -e '.[tpch]')")
    else:
        print(f"chart:  {paths['chart']}")
    _print_goals(data)


def _print_goals(data: dict[str, Any]) -> None:
    for g in data.get("goals", []):
        v = g.get("value")
        text = "-" if v is None else (f"{v:.3f}x" if isinstance(v, float) else str(v))
        met = {None: "", True: "met", False: "NOT MET"}[g.get("met")]
        target = g.get("target") or ""
        print(f"goal: {g['goal']:<42} {text:>12}  {target:<26} {met}")


def cmd_all(ctx: Context) -> None:
    t0 = time.perf_counter()
    cmd_generate(ctx)
    with tempfile.TemporaryDirectory(prefix="kudusql-tpch-") as d:
        native_path = Path(d) / "native.duckdb"
        native = cmd_load(ctx, native_path)
        assert native is not None
        try:
            cmd_check(ctx)
            before = cmd_compare(ctx, native)
            cmd_micro(ctx, native)
        finally:
            native.close()
        cmd_mutate(ctx, native_path, before)
    data = ctx.save(all_seconds=round(time.perf_counter() - t0, 1))
    history = ctx.results_file.parent / "history"
    history.mkdir(parents=True, exist_ok=True)
    stamp = str(data["updated"]).replace(":", "").replace("+0000", "Z")
    shutil.copyfile(ctx.results_file, history / f"results-{stamp}.json")
    cmd_report(ctx)


HANDLERS: dict[str, Callable[[Context], object]] = {
    "generate": cmd_generate,
    "load": cmd_load,
    "run": cmd_run,
    "check": cmd_check,
    "compare": cmd_compare,
    "micro": cmd_micro,
    "mutate": cmd_mutate,
    "report": cmd_report,
    "all": cmd_all,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    progress.quiet = args.quiet
    try:
        ctx = context(args)
        HANDLERS[args.command](ctx)
        if ctx.failures:
            raise WrongAnswers(args.command, ctx.failures)
    except WrongAnswers as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    except TpchError as e:
        if args.debug:
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        progress.quiet = False
    return 0
