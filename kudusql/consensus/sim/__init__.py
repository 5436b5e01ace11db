"""A deterministic simulator of one tablet's Raft replicas over a faulty network, with
crashes, restarts, config changes and tablet copies, checking safety after every step."""
