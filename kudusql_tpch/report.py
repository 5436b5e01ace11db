"""``report``: the results file as a markdown report (``report.md``) and a PNG chart
(``report.png``: per-query times, per-query ratios, micro-queries and the mutation
phases), optionally beside a baseline results file from an earlier run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from kudusql_tpch.run import DUCK_NATIVE, DUCK_PARQUET, KUDUSQL, SYSTEM_LABELS
from kudusql_tpch.spec import sf_label

SYSTEMS = (KUDUSQL, DUCK_PARQUET, DUCK_NATIVE)
COLORS = {KUDUSQL: "#d1495b", DUCK_PARQUET: "#00798c", DUCK_NATIVE: "#edae49"}


def format_seconds(s: float) -> str:
    """A duration as the report and the CLI's summaries write it: ``12.3 s``, ``4m05s``."""
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(s + 0.5), 60)
    return f"{m}m{sec:02d}s"


def _ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:,.1f}" if v >= 10 else f"{v:.2f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}x"


def _median(q: dict[str, Any], system: str) -> float | None:
    s = q.get(system)
    return None if not s else s.get("median_ms")


def _settings(st: dict[str, Any]) -> str:
    parts = []
    for k, val in st.items():
        if val is None:
            continue
        if k == "queries" and isinstance(val, list):
            val = "all 22" if len(val) == 22 else " ".join(val)
        elif k == "buckets" and isinstance(val, dict):
            val = ", ".join(f"{t} {n}" for t, n in val.items())
            k = "tablets"
        parts.append(f"{k}: {val}")
    return "; ".join(parts)


def query_section(data: dict[str, Any]) -> dict[str, Any] | None:
    """The section with per-query timings: ``compare`` if present, else ``run``."""
    for name in ("compare", "run"):
        sec = data.get(name)
        if sec and sec.get("queries"):
            return dict(sec)
    return None


def _table(header: list[str], rows: list[list[str]], right: int = 1) -> list[str]:
    """A markdown table; columns from ``right`` on are right-aligned."""
    align = ["---" if i < right else "---:" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _met(g: dict[str, Any]) -> str:
    if g.get("met") is None:
        return "–"
    text = "yes" if g["met"] else "**NO**"
    if g.get("stretch_met"):
        text += " (stretch met)"
    return text


def markdown(data: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    sf = sf_label(float(data.get("sf") or 0))
    m = data.get("machine", {})
    v = data.get("versions", {})
    st = data.get("settings", {})
    mem = m.get("memory_bytes")
    lines = [
        f"# TPC-H SF {sf}: kudusql vs DuckDB",
        "",
        f"Updated {data.get('updated')}; kudusql {v.get('kudusql')} "
        f"(commit {str(v.get('kudusql_commit') or '?')[:10]}).",
        "",
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores"
        + (f", {mem / 2**30:.0f} GiB" if mem else "")
        + f", {m.get('platform')}"
        + (f"; load average {m['load_average']} when saved" if m.get("load_average") else "")
        + ".",
        "",
        "Versions: "
        + ", ".join(f"{k} {val}" for k, val in v.items() if val and k != "kudusql_commit")
        + ".",
        "",
        "Settings: " + _settings(st) + ".",
        "",
        "## Goals",
        "",
    ]
    grows = []
    for g in data.get("goals", []):
        val = g.get("value")
        text = "–" if val is None else (f"{val:.3f}x" if isinstance(val, float) else str(val))
        grows.append([g["goal"], text, g.get("target") or "–", _met(g)])
    lines += _table(["goal", "value", "target", "met"], grows, right=9)
    load = data.get("load")
    if load:
        lines += ["", "## Load", ""]
        rows = [
            [t, f"{x['rows']:,}", str(x["buckets"] or 1), f"{x['seconds']:.2f}"]
            for t, x in load.get("tables", {}).items()
        ]
        rows.append(["**total**", f"{load.get('rows', 0):,}", "", f"{load['seconds']:.2f}"])
        lines += _table(["table", "rows", "tablets", "seconds"], rows)
        lines.append("")
        native = load.get("duckdb_native_s")
        lines.append(
            f"Loader `{load.get('loader')}`: {format_seconds(load['seconds'])}"
            + (
                f"; DuckDB native load of the same files {format_seconds(native)}"
                f" ({_x(load.get('ratio_vs_duckdb_native'))})."
                if native
                else "."
            )
        )
    sec = query_section(data)
    if sec:
        lines += _queries_md(data, sec, baseline)
    micro = data.get("micro")
    if micro and micro.get("queries"):
        lines += ["", "## Micro-queries (Kudu paper, Table 2)", ""]
        rows = []
        for name, q in micro["queries"].items():
            k, p, n = (_median(q, s) for s in SYSTEMS)
            rows.append(
                [
                    f"`{name}`",
                    _ms(k),
                    _ms(p),
                    _ms(n),
                    _x(k / p if k and p else None),
                    _x(k / n if k and n else None),
                ]
            )
        header = ["query", "kudusql ms", "DuckDB/Parquet ms", "DuckDB native ms"]
        lines += _table([*header, "vs Parquet", "vs native"], rows)
    mut = data.get("mutation")
    if mut:
        lines += _mutation_md(mut)
    check = data.get("check")
    failures = [*(check or {}).get("failures", []), *(sec or {}).get("failures", [])]
    if failures:
        lines += ["", "## WRONG ANSWERS", ""] + [f"- {f}" for f in failures]
    return "\n".join(lines) + "\n"


def _queries_md(
    data: dict[str, Any], sec: dict[str, Any], baseline: dict[str, Any] | None
) -> list[str]:
    systems = [s for s in SYSTEMS if s in sec.get("systems", [])]
    check = (data.get("check") or {}).get("queries", {})
    base = query_section(baseline) if baseline else None
    reps, warm = sec.get("repetitions"), sec.get("warmup")
    lines = [
        "",
        "## Queries",
        "",
        f"Median of {reps} runs after {warm} warm-up run(s), in ms; ratios are kudusql's "
        "time over the other's (below 1: kudusql faster).",
        "",
    ]
    header = ["query", "rows", *[f"{SYSTEM_LABELS[s]} ms" for s in systems]]
    header += [f"vs {SYSTEM_LABELS[s]}" for s in systems[1:]]
    if base:
        header += ["baseline kudusql ms", "change"]
    header.append("answer")
    rows = []
    for name, q in sec["queries"].items():
        meds = {s: _median(q, s) for s in systems}
        k = meds.get(KUDUSQL)
        ok = q.get(KUDUSQL, {}).get("correct")
        if ok is None and name in check:
            ok = check[name].get(KUDUSQL, {}).get("correct")
        row = [name, str(q.get(KUDUSQL, {}).get("rows", "–"))]
        row += [_ms(meds[s]) for s in systems]
        row += [_x(_ratio(k, meds[s])) for s in systems[1:]]
        if base:
            b = _median(base["queries"].get(name, {}), KUDUSQL)
            row += [_ms(b), _x(k / b if k and b else None)]
        row.append("–" if ok is None else ("ok" if ok else "**WRONG**"))
        rows.append(row)
    geo = sec.get("geomean_ms", {})
    if geo:
        ratio = sec.get("geomean_ratio", {})
        g = ["**geomean**", "", *[_ms(geo.get(s)) for s in systems]]
        g += [_x(ratio.get(s)) for s in systems[1:]]
        if base:
            bg = base.get("geomean_ms", {}).get(KUDUSQL)
            kg = geo.get(KUDUSQL)
            g += [_ms(bg), _x(kg / bg if kg and bg else None)]
        g.append("")
        rows.append(g)
        tot = sec.get("total_ms", {})
        t = ["**total**", "", *[_ms(tot.get(s)) for s in systems]]
        t += ["" for _ in systems[1:]] + (["", ""] if base else []) + [""]
        rows.append(t)
    return lines + _table(header, rows)


def _mutation_md(mut: dict[str, Any]) -> list[str]:
    lines = ["", "## Mutation phase", ""]
    lines.append(
        f"About {mut.get('percent')} % of lineitem and of orders updated and as much "
        "deleted, on copies of the databases; answers checked against DuckDB native "
        "tables with the same changes."
    )
    lines.append("")
    rows = [
        [
            f"`{s['sql']}`",
            f"{s['rows']:,}",
            f"{s['kudusql_s']:.2f}",
            f"{s['duckdb_native_s']:.2f}",
        ]
        for s in mut.get("statements", [])
    ]
    lines += _table(["statement", "rows", "kudusql s", "DuckDB native s"], rows)
    comp = mut.get("compaction_s")
    if comp is not None:
        lines += ["", f"Flush and compaction of every table: {format_seconds(comp)}."]
    storage = [
        (label, mut.get(key, {}))
        for label, key in (
            ("loaded", "storage_loaded"),
            ("with deltas", "storage_with_deltas"),
            ("compacted", "storage_compacted"),
        )
    ]
    if any(s for _, s in storage):
        lines.append("")
        srows = []
        for label, s in storage:
            for t, x in s.items():
                srows.append(
                    [
                        label,
                        t,
                        str(x["diskrowsets"]),
                        str(x["redo_files"]),
                        f"{x['dms_bytes']:,}",
                    ]
                )
        lines += _table(["state", "table", "DiskRowSets", "REDO files", "DMS bytes"], srows, 2)
    phases = [
        ("loaded", mut.get("before")),
        ("with deltas", mut.get("with_deltas")),
        ("after compaction", mut.get("after_compaction")),
    ]
    lines.append("")
    prow = []
    for label, p in phases:
        if not p:
            continue
        geo = p.get("geomean_ms", {})
        ans = p.get("answers", {}).get(KUDUSQL)
        prow.append(
            [
                label,
                _ms(geo.get(KUDUSQL)),
                _ms(geo.get(DUCK_NATIVE)),
                _x(p.get("geomean_ratio", {}).get(DUCK_NATIVE)),
                f"{ans['correct']} of {ans['checked']}" if ans else "–",
            ]
        )
    header = ["phase", "kudusql geomean ms", "DuckDB native geomean ms", "ratio", "correct"]
    lines += _table(header, prow)
    names = list((mut.get("with_deltas") or {}).get("queries", {}))
    if names:
        lines.append("")
        qrows = []
        for n in names:
            vals = [_median((p or {}).get("queries", {}).get(n, {}), KUDUSQL) for _, p in phases]
            qrows.append([n, *[_ms(x) for x in vals]])
        lines += _table(["query", "loaded ms", "with deltas ms", "after compaction ms"], qrows)
    return lines


# -- the chart -----------------------------------------------------------------------------
def chart(data: dict[str, Any], path: Path) -> Path | None:
    """Write the PNG; None (and nothing written) if matplotlib is missing or there
    is nothing to draw."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    sec = query_section(data)
    micro = (data.get("micro") or {}).get("queries")
    mut = data.get("mutation")
    panels = (2 if sec else 0) + (1 if micro else 0) + (1 if mut else 0)
    if not panels:
        return None
    fig, axes = plt.subplots(panels, 1, figsize=(14, 4.2 * panels), squeeze=False)
    axs = list(axes[:, 0])
    sf = sf_label(float(data.get("sf") or 0))
    title = f"TPC-H SF {sf}: kudusql vs DuckDB ({data.get('updated', '')})"
    fig.suptitle(title)
    if sec:
        _bars_times(axs.pop(0), sec)
        _bars_ratios(axs.pop(0), sec)
    if micro:
        _bars_micro(axs.pop(0), micro)
    if mut:
        _bars_mutation(axs.pop(0), mut)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _grouped(
    ax: Any, names: list[str], series: dict[str, list[float]], colors: dict[str, str]
) -> None:
    n = max(1, len(series))
    width = 0.8 / n
    for i, (label, vals) in enumerate(series.items()):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(names))]
        ax.bar(
            xs, [v if v else math.nan for v in vals], width, label=label, color=colors.get(label)
        )
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.legend(fontsize=8)


def _bars_times(ax: Any, sec: dict[str, Any]) -> None:
    systems = [s for s in SYSTEMS if s in sec.get("systems", [])]
    names = list(sec["queries"])
    series = {
        SYSTEM_LABELS[s]: [_median(sec["queries"][n], s) or 0.0 for n in names] for s in systems
    }
    colors = {SYSTEM_LABELS[s]: COLORS[s] for s in systems}
    _grouped(ax, names, series, colors)
    ax.set_yscale("log")
    ax.set_ylabel("median ms (log)")
    ax.set_title("Per-query time")


def _bars_ratios(ax: Any, sec: dict[str, Any]) -> None:
    systems = [s for s in SYSTEMS[1:] if s in sec.get("systems", [])]
    names = list(sec["queries"])
    series = {}
    for s in systems:
        vals = []
        for n in names:
            k, o = _median(sec["queries"][n], KUDUSQL), _median(sec["queries"][n], s)
            vals.append(k / o if k and o else 0.0)
        series[f"kudusql / {SYSTEM_LABELS[s]}"] = vals
    colors = {f"kudusql / {SYSTEM_LABELS[s]}": COLORS[s] for s in systems}
    if series:
        _grouped(ax, names, series, colors)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ratio = sec.get("geomean_ratio", {})
    geo = ", ".join(f"{SYSTEM_LABELS[s]} {r:.2f}x" for s, r in ratio.items())
    ax.set_ylabel("time ratio (below 1: kudusql faster)")
    ax.set_title("kudusql time / rival time" + (f" (geomean: {geo})" if geo else ""))


def _bars_micro(ax: Any, micro: dict[str, Any]) -> None:
    names = list(micro)
    series = {SYSTEM_LABELS[s]: [_median(micro[n], s) or 0.0 for n in names] for s in SYSTEMS}
    _grouped(ax, names, series, {SYSTEM_LABELS[s]: COLORS[s] for s in SYSTEMS})
    ax.set_yscale("log")
    ax.set_ylabel("median ms (log)")
    ax.set_title("Micro-queries (Kudu paper, Table 2)")


def _bars_mutation(ax: Any, mut: dict[str, Any]) -> None:
    phases = {
        "loaded": mut.get("before"),
        "with deltas": mut.get("with_deltas"),
        "after compaction": mut.get("after_compaction"),
    }
    names = list((mut.get("with_deltas") or {}).get("queries", {}))
    series = {
        label: [_median((p or {}).get("queries", {}).get(n, {}), KUDUSQL) or 0.0 for n in names]
        for label, p in phases.items()
        if p
    }
    colors = {"loaded": "#8d96a3", "with deltas": "#d1495b", "after compaction": "#2e4057"}
    _grouped(ax, names, series, colors)
    ax.set_yscale("log")
    ax.set_ylabel("kudusql median ms (log)")
    ax.set_title(f"Mutation phase: kudusql before and after changing ~{mut.get('percent')} %")


def write_report(
    data: dict[str, Any], directory: Path, baseline: dict[str, Any] | None = None
) -> dict[str, Path | None]:
    """``report.md`` and ``report.png`` in ``directory``; returns their paths (the PNG's
    None if it could not be drawn)."""
    directory.mkdir(parents=True, exist_ok=True)
    md = directory / "report.md"
    md.write_text(markdown(data, baseline))
    png = chart(data, directory / "report.png")
    return {"markdown": md, "chart": png}
