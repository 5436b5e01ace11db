"""The cluster: a master and tablet servers talking over Arrow Flight (issue 35).

This package owns everything that crosses a process boundary in cluster mode, and the
master's protocol logic:

- RPC: the typed control messages and their envelope (``messages.py``), the errors a
  remote call raises (``errors.py``), the client-side HybridTime tracker
  (``timestamps.py``), the retry policy (``retry.py``), the cluster secret and the local
  cluster's TLS certificate (``security.py``), server addresses (``addresses.py``), and
  the Flight server base and client (``rpc_server.py``, ``rpc_client.py``).
- The master's catalog and DDL protocol as a pure state machine (``master_state.py``,
  with the values it exchanges with tablet servers in ``master_protocol.py``, placement
  in ``placement.py``, its durable records in ``catalog/``), proven by a seeded
  simulator (``sim/``). It has no clock, thread, socket or file in it.
- The master process around it (``master/``: the catalog table, the master's messages,
  ``MasterServer``), the tablet server (``tserver/``, with its heartbeats to the
  master), and a local cluster of processes (``launcher.py``; the ``kudusql master``,
  ``tserver`` and ``cluster`` commands in ``commands.py``).

Wire formats: ``FORMAT.md`` in this directory (and ``catalog/``, ``master/``,
``tserver/``). Design:
``docs/CLUSTER.md``.
"""
