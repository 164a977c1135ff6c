"""The cluster write API: what REST requests (and the worker's own connectors) write to the config topic.

Why a module of its own: the config topic has one writer, the leader (Apache Kafka Connect's rule, which
keeps its records in one order); every write here first settles who leads (:meth:`ClusterWrites.
require_leader`). A follower answers ``NotLeaderError`` and the REST layer forwards the request. The
writes then wait until this worker has read their records back, so a REST answer already reflects them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kconnect.config.config_providers import worker_config_providers
from kconnect.config.worker import ExactlyOnceSourceSupport, WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.client_config import WorkerClients
from kconnect.runtime.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConnectError,
    NotFoundError,
    NotLeaderError,
    RebalanceNeededError,
)
from kconnect.runtime.group import auto_restart
from kconnect.runtime.group.herder import Herder
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import ConnectorError
from kconnect.runtime.plugins.config_infos import ConfigInfos
from kconnect.runtime.plugins.connector_config import ConnectorConfigError
from kconnect.runtime.plugins.connector_validation import validate_connector_config
from kconnect.runtime.plugins.override_policy import OverridePolicy
from kconnect.runtime.plugins.plugin_calls import PluginCalls, PluginCallTimeout
from kconnect.runtime.plugins.registry import PluginError, PluginRegistry
from kconnect.runtime.shell import session_keys
from kconnect.runtime.shell.stores import InternalTopics
from kconnect.runtime.storage import config_log, status_log
from kconnect.runtime.storage.config_log import TargetState
from kconnect.runtime.storage.kafka_log import KafkaLogError

log = logs.get(__name__)

#: Sends a request to another worker: (method, its base URL, path, body, extra headers).
Forwarder = Callable[[str, str, str, Any, dict[str, str]], None]


class ClusterWrites:
    """One worker's writes of cluster state, and the signing of its requests to other workers.

    Reads the herder's group view under ``lock``; ``still_member`` says whether the group member still
    holds a generation (its session was not lost); ``clients`` gives the worker's Kafka client settings.
    """

    def __init__(
        self,
        config: WorkerConfig,
        registry: PluginRegistry,
        stores: InternalTopics,
        herder: Herder,
        lock: threading.RLock,
        still_member: Callable[[], bool],
        clients: Callable[[], WorkerClients],
    ) -> None:
        self.config = config
        self.registry = registry
        self.stores = stores
        self.herder = herder
        self._lock = lock
        self._still_member = still_member
        self._clients = clients
        self._fence_lock = threading.Lock()  # one zombie-fencing round at a time (fence_zombies)
        #: How requests reach other workers (the REST layer installs it); None until then.
        self.forwarder: Forwarder | None = None
        #: Where a validation's ``validate()`` call is bounded (``connector.method.timeout.ms``).
        self.plugin_calls = PluginCalls()

    # -------------------------------------------------------------------------------------- leadership

    def leader(self) -> tuple[bool, str]:
        """Whether this worker leads now, and the URL of the last leader it knows."""
        with self._lock:
            return self.herder.is_leader, self.herder.group.leader_url

    def require_leader(self, settle_timeout_s: float = 30.0, while_rebalancing: bool = False) -> None:
        """Writes need a settled group: wait out a rebalance in progress (as Java's herder queues the
        request until its next tick), then either proceed as leader or name the leader to forward to.

        ``while_rebalancing``: a connector config may be written by the leader of the last generation
        while a rebalance is under way, as long as this member is still in the group (its generation
        was not reset by a lost session). Why: creating connectors one after another otherwise costs a
        whole rebalance per connector, each waiting for the round the previous one started. Nothing is
        lost if leadership moves in that round: the config topic is the truth, the leader reads it to
        its end when it assigns, and a config read after that starts one more round, as any does.
        """
        deadline = time.monotonic() + settle_timeout_s
        while True:
            with self._lock:
                group = self.herder.group
                rebalancing = self.herder.rebalancing
                is_leader = self.herder.is_leader
                led_last = self.herder.led_last_generation
            if is_leader:
                return
            if while_rebalancing and rebalancing and led_last and self._still_member():
                return
            if not rebalancing and group.known and group.leader_url:
                raise NotLeaderError(group.leader_url)
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if not group.known or not group.leader_url:
            raise RebalanceNeededError(
                "Cannot complete request momentarily due to no known leader URL, "
                "likely because a rebalance was underway."
            )
        raise RebalanceNeededError("Request cannot be completed because a rebalance is expected")

    # ------------------------------------------------------------------------------------ signing

    def sign(self, body: bytes) -> dict[str, str]:
        """Headers signing a request to another worker with the current session key (KIP-507), under
        ``inter.worker.signature.algorithm``."""
        algorithm = self.config.inter_worker_signature_algorithm
        return session_keys.sign(self.stores.snapshot().session_key, body, algorithm)

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Check an internal request's signature (only under ``sessioned`` and later) against the current
        session key and ``inter.worker.verification.algorithms``."""
        with self._lock:
            group_protocol = self.herder.group.protocol
        session = self.stores.snapshot().session_key
        accepted = self.config.inter_worker_verification_algorithms
        session_keys.verify(group_protocol, session, body, headers, accepted)

    # ----------------------------------------------------------------------------------- connectors

    def validate(self, config: Mapping[str, str]) -> None:
        """A connector config must pass its plugin's validation before it is written (400 otherwise).

        The plugin's ``validate()`` runs bounded by ``connector.method.timeout.ms`` on a thread of its own:
        past the bound the request answers 500 naming the call, and the thread is abandoned."""
        cfg = self.config

        def run() -> ConfigInfos:
            return validate_connector_config(
                self.registry,
                dict(config),
                # As the validate endpoint: a sink's consumer group may not be the workers' own group.
                worker_group_id=cfg.group_id,
                exactly_once_source_enabled=cfg.exactly_once_source_support == "enabled",
                worker_passthrough=cfg.passthrough,
                worker_security_protocol=cfg.security_protocol,
                override_policy=OverridePolicy.of_worker(cfg),
                config_providers=worker_config_providers(cfg),
            )

        try:
            infos = self.plugin_calls.run_bounded(
                f"connector class {config.get('connector.class')}",
                "validate",
                cfg.connector_method_timeout_ms / 1000,
                run,
            )
        except PluginCallTimeout as exc:
            raise ConnectError(f"{exc} (connector.method.timeout.ms); the config was not written") from exc
        except (ConnectorConfigError, PluginError) as exc:
            # No connector.class, or one no plugin answers to: the request is at fault (400), as in Java.
            raise BadRequestError(str(exc.args[0]) if exc.args else str(exc)) from exc
        if infos.error_count:
            raise BadRequestError(infos.invalid_config_message())
        # kconnect's own keys, which no plugin's ConfigDef knows: a bad override would be ignored silently.
        problems = auto_restart.config_errors(config)
        if problems:
            raise BadRequestError("Connector configuration is invalid: " + "; ".join(problems))

    def put_connector_config(
        self,
        name: str,
        config: Mapping[str, str],
        allow_replace: bool,
        initial_state: TargetState | None = None,
    ) -> bool:
        """Create or replace a connector's config; returns True when it was created."""
        self.require_leader(while_rebalancing=True)
        exists = self.stores.snapshot().contains(name)
        if exists and not allow_replace:
            raise AlreadyExistsError(f"Connector {name} already exists")
        full = dict(config)
        full["name"] = name
        self.validate(full)
        if not exists and initial_state is not None:
            self.stores.append_config(config_log.TargetStateRecord(name, TargetState(initial_state)))
        self.stores.await_config(self.stores.append_config(config_log.ConnectorConfig(name, full)))
        return not exists

    def delete_connector(self, name: str) -> None:
        """Remove a connector's config and target state, then tombstone its statuses."""
        self.require_leader()
        if not self.stores.snapshot().contains(name):
            raise NotFoundError(f"Connector {name} not found")
        offset = self.stores.append_config(
            config_log.ConnectorDeletion(name), config_log.TargetStateDeletion(name)
        )
        self.stores.await_config(offset)
        tombstones = [status_log.ConnectorStatusDeletion(name)] + [
            status_log.TaskStatusDeletion(t.task) for t in self.stores.status_state().task_statuses(name)
        ]
        for record in tombstones:
            try:
                self.stores.write_status(record)
            except KafkaLogError as exc:
                log.warning("could not remove a status record", error=str(exc))

    def put_static_assignment(
        self, worker_id: str, connectors: tuple[str, ...], tasks: tuple[str, ...]
    ) -> None:
        """Leader only: store an operator's override; the worker rejoins with it when it reads it."""
        self.append_config(config_log.StaticAssignmentRecord(worker_id, connectors, tasks))

    def delete_static_assignment(self, worker_id: str) -> None:
        """Leader only: drop an override; the worker's own properties apply again after it rejoins."""
        self.append_config(config_log.StaticAssignmentDeletion(worker_id))

    def write_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Leader only: task records first, then the commit that makes them visible together."""
        self.require_leader()
        if not self.stores.snapshot().contains(name):
            raise NotFoundError(f"Connector {name} not found")
        records: list[config_log.ConfigRecord] = [
            config_log.TaskConfig(TaskId(name, i), tc) for i, tc in enumerate(configs)
        ]
        self.stores.await_config(
            self.stores.append_config(*records, config_log.TaskCommit(name, len(configs)))
        )
        log.info("task configs written", connector=name, tasks=len(configs))

    def append_config(self, *records: config_log.ConfigRecord) -> None:
        """Leader only: write config records in order, then wait until this worker has read them back,
        so the answer to the REST request already reflects them."""
        self.require_leader()
        offset = self.stores.append_config(*records)
        if offset >= 0:
            self.stores.await_config(offset)

    def put_logger_level(self, namespace: str, level: str) -> None:
        """Cluster scope: write the level to the config topic; every worker (this one too) applies it."""
        self.stores.append_config(config_log.LoggerLevel(namespace, level))

    # --------------------------------------------------------------------------- exactly-once sources

    def fence_zombies(self, name: str) -> None:
        """Leader only (``PUT /connectors/{name}/fence``): fence the previous generation of an exactly-once
        source connector's tasks, then write its ``tasks-fencing-<name>`` record with the new task count.

        Serialised: two tasks of one connector may ask at once (from different workers), and a second
        round run after the first task has started would fence that task too.
        """
        from kconnect.runtime.dataplane.exactly_once import zombie_ids
        from kconnect.runtime.dataplane.fencing import fence_producers

        self.require_leader()
        if self.config.exactly_once_source_support != ExactlyOnceSourceSupport.ENABLED:
            raise BadRequestError(
                "Zombie fencing needs exactly.once.source.support=enabled on the leader; it is "
                f"{self.config.exactly_once_source_support.value}"
            )
        with self._fence_lock:
            snap = self.stores.snapshot()
            if not snap.contains(name):
                raise NotFoundError(f"Connector {name} not found")
            if not snap.is_pending_fencing(name):
                return
            previous = snap.task_count_record(name)
            ids = zombie_ids(self.config.group_id, name, previous)
            fenced = fence_producers(
                ",".join(self.config.bootstrap_servers), ids, client_settings=self._clients().internal
            )
            count = snap.task_count(name)
            self.stores.await_config(self.stores.append_config(config_log.TaskCountRecord(name, count)))
            log.info("zombie fencing done", connector=name, fenced=fenced, task_count=count)

    def ensure_fenced(self, name: str, timeout_s: float = 60.0) -> None:
        """Before an exactly-once source task starts: wait until its connector's current task configs have
        been fenced for, asking the leader (``PUT /connectors/{name}/fence``, signed) while they have not.

        Runs on the task's own thread, never the herder's: it blocks on the leader.
        """
        deadline = time.monotonic() + timeout_s
        asked = 0.0
        last_error = "no answer"
        while time.monotonic() < deadline:
            if not self.stores.snapshot().is_pending_fencing(name):
                return
            if time.monotonic() - asked >= 5.0:
                asked = time.monotonic()
                is_leader, leader_url = self.leader()
                try:
                    if is_leader:
                        self.fence_zombies(name)
                    elif leader_url and self.forwarder is not None:
                        self.forwarder("PUT", leader_url, f"/connectors/{name}/fence", b"", self.sign(b""))
                except Exception as exc:  # retried until the deadline; the last error is reported
                    last_error = str(exc)
                    log.warning("zombie fencing request failed; will retry", connector=name, error=last_error)
            time.sleep(0.2)
        raise ConnectorError(
            f"Zombie fencing for connector {name} did not complete within {timeout_s:.0f} s ({last_error}); "
            "its exactly-once source tasks cannot start before the previous generation is fenced"
        )
