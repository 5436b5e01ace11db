"""No two modules of a package import each other at run time (type-only imports under
``TYPE_CHECKING`` aside): what both need lives in a module of its own. A function-level
import that only dodges such a circle counts as an import here, so it is caught too."""

from __future__ import annotations

import grimp

#: The circle still open: ``Database`` makes ``Table``s, ``Table.scan_tokens`` plans
#: ``ScanToken``s, and ``ScanToken.execute`` without a database opens one read-only.
KNOWN = {
    "kudusql.storage.tables": {
        ("kudusql.storage.tables.scan_token", "kudusql.storage.tables.database")
    },
}


def test_no_import_cycles_between_sibling_modules() -> None:
    graph = grimp.build_graph("kudusql", "kudusql_tpch", exclude_type_checking_imports=True)
    packages = sorted(m for m in graph.modules if graph.find_children(m))
    cycles = {p: graph.nominate_cycle_breakers(p) for p in packages}
    assert {p: b for p, b in cycles.items() if b} == KNOWN
