"""The meta cache's replicas: the leader first, a named leader noted in place, a source
without replicas (an unreplicated tablet) giving the one address."""

from __future__ import annotations

from dataclasses import dataclass

from kudusql.cluster.client.meta_cache import MetaCache
from tests.cluster.mini_cluster import partitions_text


@dataclass(frozen=True)
class Replica:
    address: str


@dataclass(frozen=True)
class Location:
    tablet_id: str
    partition: str
    address: str
    replicas: tuple[Replica, ...] = ()


class Source:
    def __init__(self, locations: list[Location]) -> None:
        self.locations_ = locations
        self.calls = 0

    def locations(self, table_name: str) -> list[Location]:
        self.calls += 1
        return self.locations_


def test_replicas_leader_first_and_a_named_leader_noted() -> None:
    (p0, p1) = partitions_text(2)
    source = Source(
        [
            Location("a", p0, "h:1", (Replica("h:2"), Replica("h:1"), Replica("h:3"))),
            Location("b", p1, "h:9"),  # unreplicated: no replicas listed
        ]
    )
    cache = MetaCache(source)
    tablets = {t.tablet_id: t for t in cache.table("t").by_start.values()}
    assert tablets["a"].replicas == ("h:1", "h:2", "h:3") and tablets["a"].replicated
    assert tablets["b"].replicas == ("h:9",) and not tablets["b"].replicated
    cache.set_leader("t", "a", "h:3")
    tablets = {t.tablet_id: t for t in cache.table("t").by_start.values()}
    assert (tablets["a"].address, tablets["a"].replicas) == ("h:3", ("h:3", "h:1", "h:2"))
    assert source.calls == 1  # noted in place, not fetched again
    cache.set_leader("other", "a", "h:1")  # an uncached table: nothing to note
    assert source.calls == 1
