"""The tablet server (first version: one replica per tablet, no Raft).

| module | owns |
|--------|------|
| ``superblock.py`` | the durable list of hosted and tombstoned tablets |
| ``tablet_manager.py`` | the hosted tablets, their lifecycle, the maintenance manager |
| ``messages.py`` | the wire messages (create/alter/delete tablet, write, scan, tablet report) |
| ``server.py`` | ``TabletServer``: the RPC server serving them |
| ``tablet_replica.py`` | one Raft replica of a tablet with its log and cmeta (not wired in yet) |
| ``heartbeater.py`` | the heartbeats to the master, with full and incremental tablet reports |
| ``__main__.py`` | the process: ``python -m kudusql.cluster.tserver --dir D`` |

Formats: FORMAT.md in this package.
"""
