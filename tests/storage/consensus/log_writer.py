"""A consensus log writer for crash tests, killed by the test at a random moment.

Usage: ``python -m tests.storage.consensus.log_writer DIR SEED [KILL_POINT SKIP]``

It opens (so recovers) the log at DIR and, as a new leader of a higher term (kept in
DIR.cmeta, as Raft keeps it), appends batches of entries whose content is a function of
their OpId, syncing most of them, truncating and GCing now and then. After each sync it
prints ``SYNCED <index> <term>``; before a truncation ``TRUNCATING <index> <new term>``
(the entries after it may go from then on) and after it ``TRUNC <index> <new term>``
(they are gone for good).
With KILL_POINT (a ``faults`` point) it SIGKILLs itself at the SKIP+1-th such call.
"""

from __future__ import annotations

import random
import sys

from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import ConsensusMetadata
from kudusql.storage.consensus import ConsensusLog, ConsensusMetadataFile
from kudusql.storage.fs import faults
from tests.storage.consensus.entries import entry

SEGMENT_SIZE = 4096


def main() -> None:
    directory, seed = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 3:
        faults.inject(sys.argv[3], skip=int(sys.argv[4]), kill=True)
    rng = random.Random(seed)
    log = ConsensusLog.open(directory, segment_size=SEGMENT_SIZE)
    # Terms only grow, across restarts too: as Raft does, the term is in the cmeta.
    cmeta = ConsensusMetadataFile(directory + ".cmeta")
    meta = (
        cmeta.load()
        if cmeta.exists()
        else ConsensusMetadata.new_replica(RaftConfig.of_voters(["a"]))
    )

    def new_term() -> int:
        nonlocal meta
        meta = ConsensusMetadata(
            meta.current_term + 1, None, meta.committed_config, meta.data_state
        )
        cmeta.store(meta)
        return meta.current_term

    term = new_term()
    print(f"OPEN {log.last_opid().index} {log.last_opid().term}", flush=True)
    while True:
        r = rng.random()
        last = log.last_opid().index
        if r < 0.08 and last >= log.first_index:
            k = rng.randint(log.first_index - 1, last)
            term = new_term()
            print(f"TRUNCATING {k} {term}", flush=True)
            log.truncate_after(k)
            print(f"TRUNC {k} {term}", flush=True)
        elif r < 0.12:
            log.gc(last - rng.randint(0, 60))
        else:
            n = rng.randint(1, 30)
            log.append([entry(term, last + 1 + i, rng.randint(0, 300)) for i in range(n)])
            if rng.random() < 0.8:
                log.sync()
                lo = log.last_opid()
                print(f"SYNCED {lo.index} {lo.term}", flush=True)


if __name__ == "__main__":
    main()
