"""The master process: the catalog table, the master's wire messages, ``MasterServer``
(the driver around ``MasterState``) and ``python -m kudusql.cluster.master``."""
