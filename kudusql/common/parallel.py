"""Batches of several producers, read in parallel into one stream.

The embedded table's scan (its tablets) and the cluster's ``RemoteTable`` (its tablet
servers) read every piece of a scan at once through ``parallel_batches``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

_DONE = object()


def parallel_batches(
    jobs: list[Callable[[], Iterator[pa.RecordBatch]]], workers: int, *, name: str = "scan"
) -> Iterator[pa.RecordBatch]:
    """Batches of every job, produced by up to ``workers`` jobs at a time, in
    whatever order they finish; stops the producers if the consumer goes away."""
    if len(jobs) <= 1 or workers <= 1:
        for j in jobs:
            yield from (b for b in j() if b.num_rows)
        return
    q: queue.Queue[Any] = queue.Queue(maxsize=4 * workers)
    stop = threading.Event()
    pending = list(reversed(jobs))
    lock = threading.Lock()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def worker() -> None:
        try:
            while True:
                with lock:
                    if not pending or stop.is_set():
                        return
                    job = pending.pop()
                for b in job():
                    if b.num_rows and not put(b):
                        return
        except BaseException as e:  # handed to the consumer, which raises it
            put(e)
        finally:
            put(_DONE)

    n = min(workers, len(jobs))
    # Own threads, not a shared pool: a scan its consumer abandons must not starve others
    # (its producers wait on the full queue until the generator is closed or collected).
    for i in range(n):
        threading.Thread(target=worker, name=f"{name}-{i}", daemon=True).start()
    done = 0
    try:
        while done < n:
            item = q.get()
            if item is _DONE:
                done += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        stop.set()
