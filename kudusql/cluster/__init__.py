"""The cluster: a master (catalog, placement, DDL) and tablet servers (issue 35)."""
