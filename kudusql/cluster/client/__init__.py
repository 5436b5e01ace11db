"""The cluster's thick client, data side: typed calls to tablet servers
(``tserver_client``), the cache of tablet locations (``meta_cache``), and ``RemoteTable``,
the embedded ``Table``'s read and write surface over the tablet servers
(``remote_table``). See docs/CLUSTER.md, "Client and data plane"."""
