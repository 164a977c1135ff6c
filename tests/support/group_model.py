"""An in-process model of Apache Kafka's classic group coordinator driving real herders.

Pure and deterministic: no sockets, no threads, no clock of its own. A :class:`GroupModel` holds the
members of one Connect group (each with the JoinGroup protocols it sent and its
:class:`~kconnect.runtime.group.herder.Herder`) and runs rebalance rounds the way a Kafka broker's classic
coordinator does:

* **Join phase.** Every member prepares (``Herder.on_rejoin_preparing`` with the protocol of the previous
  generation, as Java's WorkerCoordinator.onJoinPrepare uses ``currentConnectProtocol``) and sends
  ``protocol.join_protocols(connect.protocol, its WorkerState)``. All members must have joined before the
  generation completes, so every stop made while preparing happens before any start of the new generation.
* **Protocol selection**, every generation (unlike the embedded test broker, which never re-selects): the
  candidates are the names every member lists; each member votes for the first name of its own list that is a
  candidate; the name with the most votes wins. Ties go to the first name in the iteration order of the
  coordinator's hash map of votes (see :func:`select_protocol`; both coordinator implementations are
  modelled).
* **Leader.** The first member to join an empty group leads; a leader that leaves is replaced by the first
  member in the coordinator's iteration order of its members map; a leader that rejoins stays leader.
* **Generation ids** start at 1 and grow by one per completed join phase (also when the group empties).
* **Sync phase.** The leader decodes the metadata of the selected protocol of every member
  (``protocol.decode_metadata``), runs its assignor, every assignment is encoded
  (``protocol.encode_assignment``) and decoded by its member (``protocol.decode_assignment``), and each
  member's herder gets ``on_rebalanced``. Members apply their assignments one after another, in an order a
  test can choose, and after every single one the model checks that nothing runs on two members.

The herders' actions are carried out: Start*/Stop* update what each member runs (with start and stop
counters), ``RequestRejoin`` schedules the member's next JoinGroup (now, or after its delay on the model's
clock), ``CatchUpConfig`` hands the herder the newest config, ``ReadyToLeave`` makes the member leave.

The leader's assignor is a parameter with the signature of ``assignor.leader_assign`` (by default the
runtime's own, see :func:`default_assignor`); each member keeps its own assignor state (as each Java worker
keeps its own IncrementalCooperativeAssignor), used when it leads, and the leader passes its last completed
generation (Java's lastCompletedGenerationId) when the assignor takes ``last_completed_generation``.
Members whose decoded metadata says they are leaving are passed as ``leaving``.

Not modelled: static membership, rebalance and session timeouts (a member that stops heartbeating while
its process keeps running work: every removal here stops the process first), JoinGroup retries.
"""

from __future__ import annotations

import inspect
import itertools
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeAlias

from kconnect.runtime.group import assignor as assignor_module
from kconnect.runtime.group import protocol
from kconnect.runtime.group.eager_assignor import eager_assign
from kconnect.runtime.group.herder import (
    Action,
    CatchUpConfig,
    Herder,
    PublishTaskConfigs,
    RequestRejoin,
    StartConnector,
    StartTask,
    StopConnector,
    StopTask,
)
from kconnect.runtime.group.protocol import ConnectAssignment, WorkerState
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import config_log
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, ConfigState
from tests.support.revoking_assignor import revoking_assign

__all__ = [
    "AdapterState",
    "AssignFn",
    "ConfigTopic",
    "Coordinator",
    "DoubleRun",
    "GroupModel",
    "InconsistentGroupProtocol",
    "JavaHashMapKeys",
    "Member",
    "Round",
    "ScalaMutableHashMapKeys",
    "adapter_assign",
    "candidate_protocols",
    "default_assignor",
    "java_string_hash",
    "real_leader_assign",
    "scala_immutable_hashmap_order",
    "select_protocol",
    "shuffled",
    "vote",
]

#: Which broker-side implementation of the classic group protocol to follow. They differ only in hash-map
#: iteration orders, i.e. in how ties between protocols and the choice of a replacement leader fall:
#: ``"java"``: ``ClassicGroup`` of the group-coordinator module (the only one from Kafka 4.0; 3.7-3.9 with the
#: new coordinator enabled). ``"scala"``: ``GroupMetadata`` of ``kafka.coordinator.group`` (the default up to
#: 3.9), Scala 2.13 collections.
Coordinator = Literal["java", "scala"]

Item: TypeAlias = str | TaskId  # a connector (its name) or a task


# ------------------------------------------------------------------------------------ JVM iteration orders


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` (over UTF-16 code units), as a signed 32-bit int."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return _int32(h)


def _java_spread(h: int) -> int:
    u = h & 0xFFFFFFFF
    return u ^ (u >> 16)  # HashMap.hash(): h ^ (h >>> 16); only the low bits are used


class JavaHashMapKeys:
    """The key iteration order of a ``java.util.HashMap<String, ?>`` built by ``put``/``remove``.

    Buckets in index order (``(h ^ h >>> 16) & (capacity - 1)``); inside a bucket, insertion order (appends go
    to the tail, resizes split a bucket keeping relative order). Capacity starts at 16, doubles when the size
    exceeds 3/4 of it (or when a bucket reaches 9 entries below capacity 64, instead of treeifying) and never
    shrinks. A treeified bucket (9+ colliding keys at capacity >= 64) is not modelled.
    """

    def __init__(self) -> None:
        self._capacity = 16
        self._seq = itertools.count()
        self._keys: dict[str, int] = {}

    def _bucket(self, key: str) -> int:
        return _java_spread(java_string_hash(key)) & (self._capacity - 1)

    def put(self, key: str) -> None:
        if key in self._keys:
            return  # replacing a value keeps the entry where it is
        self._keys[key] = next(self._seq)
        bucket = self._bucket(key)
        if sum(1 for k in self._keys if self._bucket(k) == bucket) >= 9:
            if self._capacity >= 64:
                raise NotImplementedError("a treeified HashMap bucket is not modelled")
            self._capacity *= 2
        if len(self._keys) > self._capacity * 3 // 4:
            self._capacity *= 2

    def remove(self, key: str) -> None:
        self._keys.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def order(self) -> list[str]:
        return sorted(self._keys, key=lambda k: (self._bucket(k), self._keys[k]))


def _scala_improve_mutable(h: int) -> int:
    u = h & 0xFFFFFFFF
    return _int32(u ^ (u >> 16))


class ScalaMutableHashMapKeys:
    """The key iteration order of a Scala 2.13 ``mutable.HashMap[String, _]``.

    Buckets in index order (``improved & (capacity - 1)``, ``improved = h ^ (h >>> 16)``); inside a bucket,
    entries are kept sorted by their improved hash (a signed int), equal hashes in insertion order. Capacity
    starts at 16 and doubles before an insertion that would bring the size to 3/4 of it; it never shrinks.
    """

    def __init__(self) -> None:
        self._capacity = 16
        self._seq = itertools.count()
        self._keys: dict[str, int] = {}

    def put(self, key: str) -> None:
        if key in self._keys:
            return
        if len(self._keys) + 1 >= self._capacity * 3 // 4:
            self._capacity *= 2
        self._keys[key] = next(self._seq)

    def remove(self, key: str) -> None:
        self._keys.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def order(self) -> list[str]:
        def sort_key(k: str) -> tuple[int, int, int]:
            h = _scala_improve_mutable(java_string_hash(k))
            return (h & (self._capacity - 1), h, self._keys[k])

        return sorted(self._keys, key=sort_key)


def _scala_improve_immutable(h: int) -> int:
    # scala.collection.Hashing.improve, used by immutable.HashMap (CHAMP).
    x = _int32(h + ~_int32(h << 9))
    x = _int32(x ^ ((x & 0xFFFFFFFF) >> 14))
    x = _int32(x + _int32(x << 4))
    return _int32(x ^ ((x & 0xFFFFFFFF) >> 10))


def scala_immutable_hashmap_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a Scala 2.13 ``immutable.HashMap`` (CHAMP trie) holding ``keys``.

    At each level the 5 bits of the improved hash at that level pick a slot; a node lists the entries stored
    inline in slot order, then descends into its sub-nodes in slot order. Independent of insertion order,
    except for keys with equal hashes (a collision node), which keep the order of ``keys``.
    """
    unique = list(dict.fromkeys(keys))
    hashes = {k: _scala_improve_immutable(java_string_hash(k)) & 0xFFFFFFFF for k in unique}

    def walk(group: list[str], shift: int) -> list[str]:
        if len({hashes[k] for k in group}) == 1:
            return group  # a collision node: insertion order
        slots: dict[int, list[str]] = {}
        for k in group:
            slots.setdefault((hashes[k] >> shift) & 31, []).append(k)
        inline = [ks[0] for _, ks in sorted(slots.items()) if len(ks) == 1]
        nested = [walk(ks, shift + 5) for _, ks in sorted(slots.items()) if len(ks) > 1]
        return inline + [k for sub in nested for k in sub]

    return walk(unique, 0)


# ------------------------------------------------------------------------------------ protocol selection


def candidate_protocols(advertised: Iterable[Sequence[str]]) -> set[str]:
    """The protocol names every member lists (Kafka's ``candidateProtocols``)."""
    lists = [set(names) for names in advertised]
    if not lists:
        raise ValueError("cannot select a protocol for an empty group")
    return set.intersection(*lists)


def vote(names: Sequence[str], candidates: set[str]) -> str:
    """A member's vote: the first name of its own (preference-ordered) list that is a candidate."""
    for name in names:
        if name in candidates:
            return name
    raise ValueError("member does not support any of the candidate protocols")


def select_protocol(advertised: Sequence[Sequence[str]], coordinator: Coordinator = "java") -> str:
    """The group protocol Kafka's classic coordinator selects; ``advertised`` is each member's list of names,
    in the coordinator's iteration order of its members.

    Every member votes (:func:`vote`) and the name with the most votes wins. On a tie:

    * ``"java"`` (``ClassicGroup.selectProtocol``): votes are counted in a ``java.util.HashMap`` filled in
      member order and the winner is ``stream().max(comparingInt(count))``, which keeps the earlier of equal
      entries: the first tied name in that HashMap's iteration order.
    * ``"scala"`` (``GroupMetadata.selectProtocol``): ``votes.groupBy(identity).maxBy(_._2.size)``; ``maxBy``
      keeps the first maximum in the iteration order of the ``immutable.HashMap`` ``groupBy`` returns.

    Neither is a documented rule (both are hash orders), and Connect's ladders never tie: every member votes
    for the newest protocol all members share.
    """
    candidates = candidate_protocols(advertised)
    votes = [vote(names, candidates) for names in advertised]
    counts: dict[str, int] = {}
    for v in votes:
        counts[v] = counts.get(v, 0) + 1
    if coordinator == "java":
        table = JavaHashMapKeys()
        for v in votes:
            table.put(v)
        order = table.order()
    elif coordinator == "scala":
        order = scala_immutable_hashmap_order(votes)
    else:
        raise ValueError(f"unknown coordinator {coordinator!r}")
    best = order[0]
    for name in order[1:]:
        if counts[name] > counts[best]:
            best = name
    return best


# ------------------------------------------------------------------------------------ the config topic


def _connector_props(name: str, version: str) -> dict[str, str]:
    return {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "name": name,
        "v": version,
    }


class ConfigTopic:
    """The group's config topic, folded as a worker folds it: connectors with committed task counts."""

    def __init__(self) -> None:
        self._state = ConfigState()
        self._next = 0
        self._versions: dict[str, tuple[int, str]] = {}

    @property
    def snapshot(self) -> ClusterConfigSnapshot:
        return self._state.snapshot()

    def _write(self, record: config_log.ConfigRecord) -> None:
        self._state = config_log.apply(self._state, record, self._next)
        self._next += 1

    def set_connectors(self, connectors: Mapping[str, int], version: str = "v1") -> ClusterConfigSnapshot:
        """Make the topic hold exactly ``connectors`` (name -> task count): new or changed ones get a config,
        task configs and a commit; missing ones a deletion. ``version`` changes every config it touches."""
        for name in sorted(set(self._versions) - set(connectors)):
            self._write(config_log.ConnectorDeletion(name))
            del self._versions[name]
        for name, count in sorted(connectors.items()):
            if count < 0:
                raise ValueError(f"connector {name!r} has a negative task count")
            if self._versions.get(name) == (count, version):
                continue
            self._write(config_log.ConnectorConfig(name, _connector_props(name, version)))
            for i in range(count):
                self._write(config_log.TaskConfig(TaskId(name, i), {"task": str(i), "v": version}))
            self._write(config_log.TaskCommit(name, count))
            self._versions[name] = (count, version)
        return self.snapshot


# ------------------------------------------------------------------------------------ assignors


class AssignFn(Protocol):
    """The signature of ``assignor.leader_assign``."""

    def __call__(
        self,
        state: Any,
        *,
        selected_protocol: str,
        leader_id: str,
        members: Mapping[str, WorkerState],
        leader_config_offset: int,
        connectors: Mapping[str, int],
        now_ms: int,
        max_delay_ms: int,
        generation: int,
        leaving: frozenset[str] = ...,
    ) -> tuple[dict[str, ConnectAssignment], Any]: ...


@dataclass(frozen=True, slots=True)
class AdapterState:
    """The stand-in assignor's memory: the protocol version it last assigned with (None: never led)."""

    last_version: int | None = None


def adapter_assign(
    state: AdapterState | None,
    *,
    selected_protocol: str,
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    now_ms: int,
    max_delay_ms: int,
    generation: int,
    leaving: frozenset[str] = frozenset(),
) -> tuple[dict[str, ConnectAssignment], AdapterState]:
    """A stand-in for ``leader_assign`` on the existing assignors: eager for ``default``, ``revoking_assign``
    for the cooperative protocols, and KIP-415's downgrade: the first ``default`` round after this leader
    assigned cooperatively gives everyone an empty v0 assignment. No scheduled delay, no leaving members."""
    del now_ms, max_delay_ms, generation, leaving
    state = state if state is not None else AdapterState()
    version = protocol.version_for_protocol(selected_protocol)
    if version == protocol.V0:
        result = eager_assign(leader_id, members, leader_config_offset, connectors)
        if state.last_version is not None and state.last_version >= protocol.V1:
            result = {m: replace(a, connectors=(), tasks=()) for m, a in result.items()}
        return result, AdapterState(version)
    result = revoking_assign(leader_id, members, leader_config_offset, connectors, version)
    return result, AdapterState(version)


def real_leader_assign() -> tuple[AssignFn, Callable[[], Any]] | None:
    """``(assignor.leader_assign, assignor.CooperativeState)`` when the runtime has them."""
    fn = getattr(assignor_module, "leader_assign", None)
    state_type = getattr(assignor_module, "CooperativeState", None)
    if fn is None or state_type is None:
        return None
    return fn, state_type


def default_assignor() -> tuple[AssignFn, Callable[[], Any]]:
    """The runtime's ``leader_assign`` if present, else :func:`adapter_assign`."""
    return real_leader_assign() or (adapter_assign, AdapterState)


# ------------------------------------------------------------------------------------ the model


class InconsistentGroupProtocol(Exception):
    """JoinGroup rejected: the member shares no protocol with the group's current members."""


class DoubleRun(AssertionError):
    """A connector or task ran on two members at once."""


@dataclass
class Member:
    """One worker process in the group, as the coordinator and the model see it."""

    member_id: str
    worker: str
    connect_protocol: str
    herder: Herder
    url: str
    #: The (name, metadata) list of its last JoinGroup.
    protocols: tuple[tuple[str, bytes], ...] = ()
    #: The protocol of the last generation it completed (what Java calls currentConnectProtocol).
    last_protocol: str | None = None
    #: The last generation it completed (Java's lastCompletedGenerationId); -1 before any.
    last_generation: int = -1
    running_connectors: set[str] = field(default_factory=set)
    running_tasks: set[TaskId] = field(default_factory=set)
    starts: int = 0
    stops: int = 0
    #: When the herder asked to rejoin (model clock, ms); None: not asked.
    rejoin_at: int | None = None
    #: This worker's assignor state, used and replaced whenever it leads.
    assignor_state: Any = None
    ready_to_leave: bool = False
    #: Advertise only these of the names ``connect_protocol`` allows (None: all of them).
    only: tuple[str, ...] | None = None
    published: list[PublishTaskConfigs] = field(default_factory=list)

    @property
    def advertised(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.protocols)

    def running(self) -> set[Item]:
        return {*self.running_connectors, *self.running_tasks}


@dataclass(frozen=True)
class Round:
    """What one generation looked like."""

    generation: int
    protocol: str | None
    leader: str | None
    #: Member ids in the coordinator's iteration order.
    members: tuple[str, ...]
    advertised: Mapping[str, tuple[str, ...]]
    #: The metadata version the leader decoded for each member (under the selected protocol).
    metadata_versions: Mapping[str, int]
    #: Each member's assignment as it decoded it.
    assignments: Mapping[str, ConnectAssignment]
    #: Per member: stops made while preparing to join, stops and starts while applying the assignment.
    stops_before_join: Mapping[str, int]
    stops_on_sync: Mapping[str, int]
    starts_on_sync: Mapping[str, int]
    #: The order members applied their assignments in.
    delivery: tuple[str, ...]


@dataclass(frozen=True)
class Event:
    generation: int
    phase: str  # "prepare", "sync", "config", "leave", "catch-up", "begin-leave"
    member: str
    action: str
    item: Item


Delivery = Callable[[Sequence[str]], Sequence[str]]


def shuffled(seed: int) -> Delivery:
    """A delivery order that shuffles members differently every round, reproducibly."""
    rng = random.Random(seed)

    def order(members: Sequence[str]) -> list[str]:
        out = list(members)
        rng.shuffle(out)
        return out

    return order


class GroupModel:
    """One Connect group on a modelled classic coordinator. See the module docstring.

    Typical use::

        g = GroupModel({"a": 3, "b": 2})
        g.add_member("w1", "sessioned"); g.add_member("w2", "eager")
        g.settle()
        assert g.protocol == "default"; g.assert_exactly_once()
    """

    def __init__(
        self,
        connectors: Mapping[str, int] | None = None,
        *,
        assign: AssignFn | None = None,
        initial_state: Callable[[], Any] | None = None,
        coordinator: Coordinator = "java",
        max_delay_ms: int = 0,
        delivery: Delivery | None = None,
    ) -> None:
        if (assign is None) != (initial_state is None):
            raise ValueError("give both assign and initial_state, or neither")
        if assign is None or initial_state is None:
            assign, initial_state = default_assignor()
        self.assign: AssignFn = assign
        try:
            self._takes_last_completed = "last_completed_generation" in inspect.signature(assign).parameters
        except (TypeError, ValueError):
            self._takes_last_completed = False
        self.initial_state: Callable[[], Any] = initial_state
        self.coordinator: Coordinator = coordinator
        self.max_delay_ms = max_delay_ms
        self.delivery: Delivery = delivery or sorted
        self.config = ConfigTopic()
        self.config.set_connectors(dict(connectors or {}))
        self.now_ms = 0
        self.generation = 0
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self._order: JavaHashMapKeys | ScalaMutableHashMapKeys = (
            JavaHashMapKeys() if coordinator == "java" else ScalaMutableHashMapKeys()
        )
        self._incarnations: dict[str, int] = {}
        self._membership_changed = False
        self._phase = "setup"
        self.rounds: list[Round] = []
        self.events: list[Event] = []
        #: Members that have left; their counters stay readable.
        self.departed: list[Member] = []

    # -- queries ----------------------------------------------------------------------------------------

    @property
    def snapshot(self) -> ClusterConfigSnapshot:
        return self.config.snapshot

    def member_order(self) -> list[str]:
        """Member ids in the coordinator's iteration order of its members map."""
        return self._order.order()

    def worker(self, worker: str) -> Member:
        """The current member of a worker process."""
        found = [m for m in self.members.values() if m.worker == worker]
        if len(found) != 1:
            raise KeyError(f"worker {worker!r} has {len(found)} members in the group")
        return found[0]

    def owners(self) -> dict[Item, list[str]]:
        """Every running item -> the members running it."""
        out: dict[Item, list[str]] = {}
        for mid in sorted(self.members):
            for item in sorted(self.members[mid].running(), key=str):
                out.setdefault(item, []).append(mid)
        return out

    def expected_items(self) -> set[Item]:
        snap = self.snapshot
        return {*snap.connectors(), *(t for c in snap.connectors() for t in snap.tasks(c))}

    def check_exclusive(self, context: str = "") -> None:
        """Raise :class:`DoubleRun` if any connector or task runs on two members."""
        doubled = {str(item): mids for item, mids in self.owners().items() if len(mids) > 1}
        if doubled:
            raise DoubleRun(f"generation {self.generation} {context}: running on several members: {doubled}")

    def assert_exactly_once(self) -> None:
        """Every configured connector and task runs on exactly one member, nothing else runs."""
        owners = self.owners()
        expected = self.expected_items()
        problems = {
            "twice": sorted(str(i) for i, m in owners.items() if len(m) > 1),
            "missing": sorted(str(i) for i in expected - set(owners)),
            "unexpected": sorted(str(i) for i in set(owners) - expected),
        }
        if any(problems.values()):
            raise AssertionError(f"generation {self.generation}: not exactly once: {problems}")

    def needs_rebalance(self) -> bool:
        """A JoinGroup is pending now: membership changed or a member asked to rejoin."""
        if self._membership_changed:
            return True
        return any(m.rejoin_at is not None and m.rejoin_at <= self.now_ms for m in self.members.values())

    def total_starts(self) -> int:
        return sum(m.starts for m in [*self.members.values(), *self.departed])

    def total_stops(self) -> int:
        return sum(m.stops for m in [*self.members.values(), *self.departed])

    # -- membership events -------------------------------------------------------------------------

    def add_member(
        self, worker: str, connect_protocol: str = "sessioned", *, advertise: Sequence[str] | None = None
    ) -> str:
        """Start a worker process: a new member (id ``<worker>-<n>``) sends its first JoinGroup.

        ``advertise`` keeps only those names of what ``connect.protocol`` advertises (a worker that dropped
        old protocols, say). Raises :class:`InconsistentGroupProtocol` if the member shares no protocol with
        every current member, as the coordinator answers INCONSISTENT_GROUP_PROTOCOL.
        """
        n = self._incarnations.get(worker, 0) + 1
        mid = f"{worker}-{n}"
        herder = Herder(worker_id=worker, snapshot=self.snapshot)
        member = Member(mid, worker, connect_protocol, herder, f"http://{worker}:8083/")
        if advertise is not None:
            unknown = set(advertise) - set(protocol.protocol_names(connect_protocol))
            if unknown or not advertise:
                raise ValueError(f"connect.protocol={connect_protocol} cannot advertise {sorted(unknown)}")
            member.only = tuple(advertise)
        member.protocols = self._join_protocols(member)
        if self.members:
            shared = candidate_protocols(m.advertised for m in self.members.values())
            if not shared & set(member.advertised):
                raise InconsistentGroupProtocol(
                    f"{mid} advertises {member.advertised}; "
                    f"the group's members all share only {sorted(shared)}"
                )
        self._incarnations[worker] = n
        member.assignor_state = self.initial_state()
        self.members[mid] = member
        self._order.put(mid)
        if self.leader is None:
            self.leader = mid
        self._membership_changed = True
        return mid

    def remove_member(self, member_id: str) -> None:
        """The worker process stops (shutdown or crash): everything it runs stops, and the coordinator
        removes the member (LeaveGroup, or its session expiring)."""
        member = self.members.pop(member_id)
        self._phase = "leave"
        for task in sorted(member.running_tasks):
            self._record(member, "stop", task)
        for name in sorted(member.running_connectors):
            self._record(member, "stop", name)
        member.stops += len(member.running_tasks) + len(member.running_connectors)
        member.running_tasks.clear()
        member.running_connectors.clear()
        self._order.remove(member_id)
        if self.leader == member_id:
            order = self._order.order()
            self.leader = order[0] if order else None
        self.departed.append(member)
        self._membership_changed = True

    def restart_member(self, member_id: str, connect_protocol: str | None = None) -> str:
        """Stop a worker and start it again (with another ``connect.protocol`` if given): it leaves and a new
        member of the same worker joins, in the same join phase."""
        member = self.members[member_id]
        self.remove_member(member_id)
        if connect_protocol is None:
            return self.add_member(member.worker, member.connect_protocol, advertise=member.only)
        return self.add_member(member.worker, connect_protocol)

    def begin_leave(self, member_id: str) -> None:
        """kconnect's graceful hand-over: the herder announces its departure."""
        member = self.members[member_id]
        self._phase = "begin-leave"
        begin = getattr(member.herder, "begin_leave", None)
        if begin is None:
            raise NotImplementedError("this herder has no graceful leave")
        self._apply(member, begin())

    # -- config events -----------------------------------------------------------------------------

    def set_connectors(
        self, connectors: Mapping[str, int], version: str = "v1", *, only: Iterable[str] | None = None
    ) -> None:
        """Write to the config topic; every member's herder (or only the ``only`` members) reads it."""
        snap = self.config.set_connectors(connectors, version)
        self._phase = "config"
        targets = set(only) if only is not None else set(self.members)
        for mid in sorted(targets):
            member = self.members[mid]
            self._apply(member, member.herder.on_config(snap))
        self.check_exclusive("after a config change")

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    # -- rebalancing -------------------------------------------------------------------------------

    def settle(self, max_rounds: int = 25) -> list[Round]:
        """Rebalance while anything asks for it, moving the clock to scheduled rejoins; the rounds run."""
        done: list[Round] = []
        for _ in range(max_rounds):
            self._leave_ready_members()
            if not self.needs_rebalance():
                scheduled = [m.rejoin_at for m in self.members.values() if m.rejoin_at is not None]
                if not scheduled:
                    return done
                self.now_ms = max(self.now_ms, min(scheduled))
            done.append(self.rebalance())
        raise AssertionError(f"the group did not settle within {max_rounds} rounds: {self.rounds[-3:]}")

    def rebalance(self) -> Round:
        """One generation: join phase, protocol selection, leader's assignment, sync phase."""
        self._membership_changed = False
        next_generation = self.generation + 1
        # Join phase: everyone prepares and sends its JoinGroup before the generation can complete.
        self._phase = "prepare"
        stops_before: dict[str, int] = {}
        for mid in sorted(self.members):
            member = self.members[mid]
            before = member.stops
            member.rejoin_at = None
            actions = member.herder.on_rejoin_preparing(
                member_lost=False, selected_protocol=member.last_protocol
            )
            self._apply(member, actions, generation=next_generation)
            stops_before[mid] = member.stops - before
            member.protocols = self._join_protocols(member)
        self.generation = next_generation
        order = tuple(self._order.order())
        if not order:
            self.protocol, self.leader = None, None
            r = Round(self.generation, None, None, (), {}, {}, {}, {}, {}, {}, ())
            self.rounds.append(r)
            return r
        advertised = {mid: self.members[mid].advertised for mid in order}
        self.protocol = select_protocol([advertised[mid] for mid in order], self.coordinator)
        if self.leader not in self.members:  # maybeElectNewJoinedLeader; all members rejoin here
            self.leader = order[0]
        leader = self.members[self.leader]

        # The leader decodes everyone's metadata of the selected protocol and assigns.
        versions: dict[str, int] = {}
        states: dict[str, WorkerState] = {}
        for mid in order:
            version, state = protocol.decode_metadata(dict(self.members[mid].protocols)[self.protocol])
            versions[mid], states[mid] = version, state
        leaving = frozenset(mid for mid, s in states.items() if getattr(s, "leaving", False))
        snap = leader.herder.snapshot
        extra: dict[str, Any] = {}
        if self._takes_last_completed:
            extra["last_completed_generation"] = leader.last_generation
            extra["last_protocol"] = leader.last_protocol
        result, leader.assignor_state = self.assign(
            leader.assignor_state,
            selected_protocol=self.protocol,
            leader_id=self.leader,
            members=states,
            leader_config_offset=snap.offset,
            connectors=snap.task_counts(),
            now_ms=self.now_ms,
            max_delay_ms=self.max_delay_ms,
            generation=self.generation,
            leaving=leaving,
            **extra,
        )
        if set(result) != set(order):
            raise AssertionError(f"the leader assigned {sorted(result)} for members {sorted(order)}")
        wire = {mid: protocol.encode_assignment(a) for mid, a in result.items()}

        # Sync phase: each member decodes its bytes and applies them, one after another.
        self._phase = "sync"
        delivery = tuple(self.delivery(list(order)))
        if sorted(delivery) != sorted(order):
            raise ValueError(f"delivery order {delivery} is not a permutation of {order}")
        decoded: dict[str, ConnectAssignment] = {}
        stops_on: dict[str, int] = {}
        starts_on: dict[str, int] = {}
        for mid in delivery:
            member = self.members[mid]
            decoded[mid] = protocol.decode_assignment(wire[mid])
            member.last_protocol = self.protocol
            member.last_generation = self.generation
            stops0, starts0 = member.stops, member.starts
            member.rejoin_at = None
            self._apply(
                member, member.herder.on_rebalanced(self.generation, mid, self.protocol, decoded[mid])
            )
            if mid == self.leader and getattr(leader.assignor_state, "downgrade_round", False):
                # As the worker does: the leader that sent the empty downgrade round rejoins at once.
                member.rejoin_at = self.now_ms
            stops_on[mid], starts_on[mid] = member.stops - stops0, member.starts - starts0
            self.check_exclusive(f"after {mid} applied its assignment")
        r = Round(
            self.generation,
            self.protocol,
            self.leader,
            order,
            advertised,
            versions,
            decoded,
            stops_before,
            stops_on,
            starts_on,
            delivery,
        )
        self.rounds.append(r)
        return r

    # -- internals ---------------------------------------------------------------------------------

    def _join_protocols(self, member: Member) -> tuple[tuple[str, bytes], ...]:
        sent = protocol.join_protocols(member.connect_protocol, self._worker_state(member))
        return tuple((name, data) for name, data in sent if member.only is None or name in member.only)

    def _worker_state(self, member: Member) -> WorkerState:
        herder = member.herder
        state = WorkerState(member.url, herder.snapshot.offset, herder.current_allocation())
        if getattr(herder, "leaving", False):
            state = replace(state, leaving=True)
        return state

    def _leave_ready_members(self) -> None:
        for mid in sorted(self.members):
            if self.members[mid].ready_to_leave:
                self.remove_member(mid)

    def _record(self, member: Member, what: str, item: Item, generation: int | None = None) -> None:
        gen = self.generation if generation is None else generation
        self.events.append(Event(gen, self._phase, member.member_id, what, item))

    def _apply(self, member: Member, actions: Sequence[Action], *, generation: int | None = None) -> None:
        for action in actions:
            match action:
                case StartConnector(name=name) | StartTask(task=name):
                    running: set[Any] = (
                        member.running_connectors
                        if isinstance(action, StartConnector)
                        else member.running_tasks
                    )
                    if name in running:
                        raise AssertionError(f"{member.member_id} started {name} twice")
                    running.add(name)
                    member.starts += 1
                    self._record(member, "start", name, generation)
                case StopConnector(name=name) | StopTask(task=name):
                    running = (
                        member.running_connectors
                        if isinstance(action, StopConnector)
                        else member.running_tasks
                    )
                    if name not in running:
                        raise AssertionError(f"{member.member_id} stopped {name}, which it does not run")
                    running.discard(name)
                    member.stops += 1
                    self._record(member, "stop", name, generation)
                case RequestRejoin(delay_ms=delay):
                    at = self.now_ms + delay
                    member.rejoin_at = at if member.rejoin_at is None else min(member.rejoin_at, at)
                case CatchUpConfig():
                    # The worker reads the config topic to its end before it rejoins.
                    if member.herder.snapshot is not self.snapshot:
                        phase, self._phase = self._phase, "catch-up"
                        self._apply(member, member.herder.on_config(self.snapshot), generation=generation)
                        self._phase = phase
                case PublishTaskConfigs():
                    member.published.append(action)
                case _ if type(action).__name__ == "ReadyToLeave":
                    member.ready_to_leave = True
                case _ if type(action).__name__ == "ResetActiveTopics":
                    pass  # bookkeeping in the status topic (KIP-558): nothing the group model tracks
                case _:
                    raise AssertionError(f"the model does not know the herder action {action!r}")
        # What the model tracks and what the herder believes must agree.
        if member.running_connectors != set(member.herder.running_connectors) or member.running_tasks != set(
            member.herder.running_tasks
        ):
            raise AssertionError(f"{member.member_id}: the model's and the herder's running sets differ")
