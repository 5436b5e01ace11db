"""The cluster: a master and tablet servers talking over Arrow Flight (issue 35).

This package owns everything that crosses a process boundary in cluster mode: the typed
control messages and their envelope (``messages.py``), the errors a remote call raises
(``errors.py``), the client-side HybridTime tracker (``timestamps.py``), the retry
policy (``retry.py``), the cluster secret and the local cluster's TLS certificate
(``security.py``), server addresses (``addresses.py``), and the Flight server base and
client (``rpc_server.py``, ``rpc_client.py``). The master's catalog state and its
simulator live beside them as pure logic with no RPC in them.

Wire formats: ``FORMAT.md`` in this directory. Design: ``docs/CLUSTER.md``.
"""
