"""The Raft consensus core of a replicated tablet, as Kudu implements it.

A pure state machine (:mod:`kudusql.consensus.raft_consensus`): messages, timer ticks,
client requests and tablet-copy results go in; messages to send, state to persist and
committed entries to apply come out. No clock, thread, socket or file is used inside;
time, HybridTime readings and randomness are inputs. :mod:`kudusql.consensus.sim` drives
it under a seed over a faulty simulated network and checks Raft's safety after every step.
"""
