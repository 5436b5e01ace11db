"""A deterministic simulator of a master and tablet servers over a faulty network."""
