"""A tablet's Raft configuration: its members, VOTER or NON_VOTER (a learner), and the
majority of voters that elections and commits count.

A configuration carries ``opid_index``, the log index of the CHANGE_CONFIG entry that
created it (0 for the initial one); config changes compare-and-swap on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class MemberType(enum.Enum):
    VOTER = "VOTER"
    NON_VOTER = "NON_VOTER"


@dataclass(frozen=True, slots=True)
class RaftPeer:
    """One member. ``promote`` marks a NON_VOTER the leader promotes once it caught up."""

    uuid: str
    member_type: MemberType
    promote: bool = False

    @property
    def is_voter(self) -> bool:
        return self.member_type is MemberType.VOTER


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """The members of a tablet's replication group; peers are unique by uuid."""

    peers: tuple[RaftPeer, ...]
    opid_index: int = 0

    @classmethod
    def of_voters(cls, uuids: tuple[str, ...] | list[str], opid_index: int = 0) -> RaftConfig:
        return cls(tuple(RaftPeer(u, MemberType.VOTER) for u in uuids), opid_index)

    def get(self, uuid: str) -> RaftPeer | None:
        for peer in self.peers:
            if peer.uuid == uuid:
                return peer
        return None

    def is_member(self, uuid: str) -> bool:
        return self.get(uuid) is not None

    def is_voter(self, uuid: str) -> bool:
        peer = self.get(uuid)
        return peer is not None and peer.is_voter

    @property
    def voters(self) -> tuple[str, ...]:
        return tuple(p.uuid for p in self.peers if p.is_voter)

    @property
    def uuids(self) -> tuple[str, ...]:
        return tuple(p.uuid for p in self.peers)

    @property
    def majority_size(self) -> int:
        """How many voters make a majority (a config without voters has none)."""
        return len(self.voters) // 2 + 1

    def with_peer(self, peer: RaftPeer, opid_index: int) -> RaftConfig:
        return RaftConfig((*self.peers, peer), opid_index)

    def without_peer(self, uuid: str, opid_index: int) -> RaftConfig:
        return RaftConfig(tuple(p for p in self.peers if p.uuid != uuid), opid_index)

    def with_promoted(self, uuid: str, opid_index: int) -> RaftConfig:
        peers = tuple(
            replace(p, member_type=MemberType.VOTER, promote=False) if p.uuid == uuid else p
            for p in self.peers
        )
        return RaftConfig(peers, opid_index)

    def __str__(self) -> str:
        members = ",".join(p.uuid + ("" if p.is_voter else "(L)") for p in self.peers)
        return f"[{members}]@{self.opid_index}"
