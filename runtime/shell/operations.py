"""Connector operations behind the REST API: pause, resume, stop, restart, config patches, offsets, topics.

The imperative shell for Apache Kafka Connect 3.9's connector operations. Writes to the config topic
go through the leader, as all of kconnect's config writes do (a follower raises ``NotLeaderError`` and the
REST layer forwards); the herder on every worker then acts on the records it reads (``herder.py``). A
task restart must run where the task is: the leader names the owner (``NotAssignedError``) and the REST
layer forwards there, as Java's ``NotAssignedException`` does. Offsets of source connectors live in the
offsets topic, offsets of sink connectors in their consumer group, read by a consumer of the group and
altered or deleted with confluent-kafka's AdminClient. The rules and shapes are pure functions in
``connector_offsets.py`` and ``herder.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from kconnect.config.errors import ConfigError
from kconnect.runtime import logs
from kconnect.runtime.dataplane.sink_reader import group_committed
from kconnect.runtime.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConnectError,
    ForbiddenError,
    NotAssignedError,
    NotFoundError,
    RebalanceNeededError,
)
from kconnect.runtime.group.group_records import GroupState
from kconnect.runtime.group.herder import RestartPlan, restart_plan
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import (
    Connector,
    ConnectorError,
    SinkConnector,
    SourceConnector,
    TopicPartition,
    connector_type,
)
from kconnect.runtime.plugins.connector_config import connector_version
from kconnect.runtime.shell import connector_offsets
from kconnect.runtime.shell.view import LeaderView, member_holds
from kconnect.runtime.shell.worker import Worker
from kconnect.runtime.storage import config_log, status_log
from kconnect.runtime.storage.config_log import TargetState
from kconnect.runtime.storage.offset_log import SourceOffset

log = logs.get(__name__)

ADMIN_TIMEOUT_S = 30.0


def owner_url(view: LeaderView | None, task: TaskId, records: GroupState | None = None) -> str | None:
    """The URL of the member that runs ``task`` after the leader's last round (``view.member_holds``)."""
    if view is None:
        return None
    for member_id, (_version, state) in view.members.items():
        _connectors, tasks = member_holds(member_id, state, view.assignments.get(member_id), records)
        if task in tasks:
            return state.url
    return None


class ConnectorOperations:
    """One worker's connector operations; REST handlers call these from a thread pool (they block)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    # -- target states -------------------------------------------------------------------------

    def set_target_state(self, name: str, state: TargetState) -> None:
        """Pause or resume: the leader writes ``target-state-<name>``; each owner transitions its part."""
        self.worker.require_leader()
        if not self.worker.snapshot().contains(name):
            raise NotFoundError(f"Unknown connector {name}")
        self.worker.append_config(config_log.TargetStateRecord(name, state))

    def stop(self, name: str) -> None:
        """Java's stop: empty task configs first, then STOPPED.

        In that order a failure between the two writes leaves a RUNNING connector with no tasks, which
        repairs itself, rather than a STOPPED connector with tasks.
        """
        self.worker.require_leader()
        if not self.worker.snapshot().contains(name):
            raise NotFoundError(f"Unknown connector {name}")
        old_tasks = self.worker.status_state().task_statuses(name)
        self.worker.write_task_configs(name, [])
        self.worker.append_config(config_log.TargetStateRecord(name, TargetState.STOPPED))
        for task in old_tasks:  # the tasks are gone: so are their statuses, as in Java
            try:
                self.worker.write_status(status_log.TaskStatusDeletion(task.task))
            except Exception as exc:
                log.warning("could not remove a task status", task=str(task.task), error=str(exc))

    # -- restarts ------------------------------------------------------------------------------

    def restart(self, name: str, include_tasks: bool, only_failed: bool) -> RestartPlan | None:
        """Write a restart request; every worker restarts what it owns of it.

        The plain restart (neither flag) is Java's restart of the connector instance alone; the same
        record carries it, so a Java worker in the group reads it the same way. With a flag the answer
        is the plan, judged by the leader from the statuses it has read, as Java's is.
        """
        self.worker.require_leader()
        if not self.worker.snapshot().contains(name):
            raise NotFoundError(f"Unknown connector: {name}")
        request = config_log.RestartRequest(name, include_tasks=include_tasks, only_failed=only_failed)
        plan: RestartPlan | None = None
        if include_tasks or only_failed:
            plan = restart_plan(request, self.worker.snapshot(), self.worker.status_state())
            if plan is None:
                raise NotFoundError(f"Status for connector {name} not found")
        self.worker.append_config(request)
        return plan

    def restart_task(self, name: str, number: int) -> None:
        """Restart one task where it runs: here, or on the owner the leader names."""
        task = TaskId(name, number)
        if self.worker.owns_running_task(task):
            self.worker.request_task_restart(task)
            return
        self.worker.require_leader()
        snap = self.worker.snapshot()
        if not snap.contains(name):
            raise NotFoundError(f"Unknown connector: {name}")
        if snap.task_config(task) is None or number >= snap.task_count(name):
            raise NotFoundError(f"Unknown task: {task}")
        url = owner_url(self.worker.view().leader_view, task, self.worker.group_state())
        if url is None:
            raise RebalanceNeededError(f"Cannot restart task {task}: it is not assigned to any worker yet")
        if url.rstrip("/") == self.worker.url.rstrip("/"):
            self.worker.request_task_restart(task)
            return
        raise NotAssignedError(url, f"task {task}")

    # -- config --------------------------------------------------------------------------------

    def patch_config(self, name: str, patch: Mapping[str, str | None]) -> None:
        """KIP-477: merge into the current config; a null value removes its key."""
        self.worker.require_leader()
        current = self.worker.snapshot().connector_config(name)
        if current is None:
            raise NotFoundError(f"Connector {name} not found")
        merged = {k: v for k, v in current.items() if v is not None}
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        self.worker.put_connector_config(name, merged, allow_replace=True)

    # -- creation with offsets (KIP-995) -------------------------------------------------------

    def create(
        self,
        name: str,
        config: Mapping[str, str],
        initial_state: TargetState | None = None,
        initial_offsets: list[connector_offsets.OffsetEntry] | None = None,
    ) -> bool:
        """``POST /connectors``, with KIP-995's ``initial_offsets`` when given; True when it was created.

        The offsets are written before the connector's config, so no task of it can start from anything
        else, and in one call rather than create-stopped, PATCH, resume. As KIP-995 says, offsets left by
        an earlier connector of the same name are wiped first (source: tombstoned; sink: its consumer group
        deleted), or a new connector would silently resume where the old one stopped. The config is
        validated and the offsets are checked (shape, then the connector's own ``alter_offsets``) before
        anything is written: a 400 leaves nothing behind.
        """
        if initial_offsets is None:
            return self.worker.put_connector_config(
                name, config, allow_replace=False, initial_state=initial_state
            )
        self.worker.require_leader(while_rebalancing=True)
        if self.worker.snapshot().contains(name):
            raise AlreadyExistsError(f"Connector {name} already exists")
        full = {**config, "name": name}
        self.worker.writes.validate(full)
        connector = self._plugin(name, full)
        if isinstance(connector, SourceConnector):
            records = connector_offsets.source_records(name, initial_offsets)
            _ask(connector.alter_offsets, full, [(r.partition, r.offset) for r in records])
            known = self.worker.source_offsets().records.get(name, {})
            stale = [SourceOffset(name, known[p].partition, None) for p in sorted(known)]
            self.worker.write_source_offsets([*stale, *records])
        else:
            assert isinstance(connector, SinkConnector)
            offsets = connector_offsets.sink_offsets(initial_offsets)
            _ask(connector.alter_offsets, full, {TopicPartition(t, p): o for (t, p), o in offsets.items()})
            self._delete_group(name, full)
            self._alter_group(name, full, offsets)
        log.info("initial offsets written", connector=name, offsets=len(initial_offsets))
        return self.worker.put_connector_config(
            name, config, allow_replace=False, initial_state=initial_state
        )

    # -- offsets -------------------------------------------------------------------------------

    def _plugin(self, name: str, props: Mapping[str, str]) -> Connector:
        try:
            desc = self.worker.registry.find(props.get("connector.class") or "", connector_version(props))
        except Exception as exc:
            raise ConnectError(f"Cannot find the plugin of connector {name}: {exc}") from exc
        return desc.cls()

    def _connector(self, name: str) -> tuple[Connector, dict[str, str]]:
        config = self.worker.snapshot().connector_config(name)
        if config is None:
            raise NotFoundError(f"Connector {name} not found")
        props = {k: v for k, v in config.items() if v is not None}
        return self._plugin(name, props), props

    def offsets(self, name: str) -> dict[str, list[dict[str, Any]]]:
        """``GET /connectors/<name>/offsets`` (KIP-875): a source connector's offsets from the offsets topic,
        a sink connector's from its consumer group, because that is where each kind commits them."""
        connector, props = self._connector(name)
        if connector_type(type(connector)) == "source":
            state = self.worker.source_offsets()
            records = state.records.get(name, {})
            return connector_offsets.source_offsets_json([records[p] for p in sorted(records)])
        return connector_offsets.sink_offsets_json(self._committed(name, props))

    def _committed(self, name: str, props: Mapping[str, str]) -> dict[tuple[str, int], int]:
        """Every offset the sink connector's consumer group committed, as Java's
        ``Admin.listConsumerGroupOffsets(group)`` lists them (no group: none).

        Asked through a consumer of the group that never subscribes (its ``committed()``), not the admin
        client's ListConsumerGroupOffsets: librdkafka (2.x; confluentinc/librdkafka#5040, open) handles that
        call's NOT_COORDINATOR answer by asking the client's own consumer group, which an admin client does
        not have, to look the coordinator up, and dereferences NULL (a worker died of it, SIGSEGV, under
        broker kills; ``sink_reader.SinkReader.committed`` moved off it first). A consumer's own OffsetFetch
        looks the new coordinator up and asks again.

        A consumer's OffsetFetch names its partitions, where the admin call asks for all of the group's.
        The question is therefore every partition in cluster metadata (``connector_offsets.all_partitions``),
        not only the connector's ``topics`` or ``topics.regex`` matches: a group keeps the offsets of topics
        its connector no longer reads (a changed ``topics``), and Java lists those. So the answer is Java's:
        Kafka drops a deleted topic's committed offsets, and a Metadata request and an all-topics
        OffsetFetch both leave out the topics the worker's principal may not describe. Only a topic created
        between the two requests, a race Java's single request does not have, is missed."""
        group = connector_offsets.sink_group_id(name, props)
        admin, settings = self._admin_for(name, props)
        try:
            metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
            partitions = connector_offsets.all_partitions(
                {topic: list(meta.partitions) for topic, meta in metadata.topics.items()}
            )
            # A consumer of the group made with the connector's admin settings (it stands in for Java's
            # admin call).
            conf = {
                **settings,
                "group.id": group,
                "client.id": f"{self.worker.worker_id}-offsets",
                "enable.auto.commit": False,
            }
            return group_committed(conf, partitions, ADMIN_TIMEOUT_S) if partitions else {}
        except KafkaException as exc:
            raise ConnectError(
                f"Failed to retrieve consumer group offsets for sink connector {name}: {exc}"
            ) from exc

    def _admin_for(self, name: str, props: Mapping[str, str]) -> tuple[AdminClient, dict[str, Any]]:
        """The connector's admin client for an offsets call and its settings
        (:func:`connector_offsets.admin_settings`): the worker's own where the connector overrides
        nothing, else one made for the call, as Java makes one per offsets request."""
        worker = self.worker.config
        try:
            settings = connector_offsets.admin_settings(
                name,
                props,
                bootstrap_servers=worker.bootstrap_servers,
                security_protocol=worker.security_protocol,
                worker_passthrough=worker.passthrough,
            )
        except ConfigError as exc:
            raise BadRequestError(f"Connector {name}'s admin client settings: {exc}") from exc
        if settings is None:
            own = {"bootstrap.servers": ",".join(worker.bootstrap_servers), **self.worker.clients.admin}
            return self.worker.admin(), own
        return AdminClient(dict[str, str | int | float | bool](settings)), settings

    def _check_modifiable(self, name: str) -> tuple[Connector, dict[str, str]]:
        self.worker.require_leader()
        connector, props = self._connector(name)
        snap = self.worker.snapshot()
        if snap.target_state(name) is not TargetState.STOPPED or snap.task_count(name) != 0:
            raise BadRequestError(connector_offsets.not_stopped(name))
        return connector, props

    def alter_offsets(self, name: str, entries: list[connector_offsets.OffsetEntry]) -> str:
        """``PATCH /connectors/<name>/offsets`` (KIP-875): only for a STOPPED connector with no tasks, so no
        running task overwrites the new offsets; the connector's ``alter_offsets`` is asked first and may
        veto. A single sink partition cannot be reset, because confluent-kafka's AdminClient cannot delete one
        partition's committed offset."""
        connector, props = self._check_modifiable(name)
        if isinstance(connector, SourceConnector):
            records = connector_offsets.source_records(name, entries)
            handled = _ask(connector.alter_offsets, props, [(r.partition, r.offset) for r in records])
            self.worker.write_source_offsets(records)
            return connector_offsets.modified_message(False, handled)
        assert isinstance(connector, SinkConnector)
        offsets = connector_offsets.sink_offsets(entries)
        resets = sorted(tp for tp, offset in offsets.items() if offset is None)
        if resets:
            # Java deletes single partitions' committed offsets with DeleteConsumerGroupOffsets, which
            # confluent-kafka's AdminClient does not offer.
            named = ", ".join(f"{t}-{p}" for t, p in resets)
            raise BadRequestError(
                f"Resetting single sink partitions (null offsets for {named}) "
                "is not supported by this worker; reset all of the connector's offsets with "
                f"DELETE /connectors/{name}/offsets, or give explicit offsets"
            )
        handled = _ask(
            connector.alter_offsets, props, {TopicPartition(t, p): o for (t, p), o in offsets.items()}
        )
        self._alter_group(name, props, offsets)
        return connector_offsets.modified_message(False, handled)

    def _alter_group(
        self, name: str, props: Mapping[str, str], offsets: Mapping[tuple[str, int], int | None]
    ) -> None:
        """Commit a sink connector's offsets for its consumer group (null ones are left out).

        This keeps the admin client's AlterConsumerGroupOffsets, unlike :meth:`_committed`: librdkafka
        parses its answer with the OffsetCommit handler told to ignore the client's consumer group
        (``ignore_cgrp``), so a NOT_COORDINATOR answer is an error returned, not the NULL group of #5040
        dereferenced; and the connector is stopped (no task commits meanwhile), as Java's admin call
        assumes. A consumer could commit too, but could not delete the group (:meth:`_delete_group`)."""
        group = connector_offsets.sink_group_id(name, props)
        request = ConsumerGroupTopicPartitions(
            group, [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(offsets.items()) if o is not None]
        )
        if not request.topic_partitions:
            return
        admin, _settings = self._admin_for(name, props)
        try:
            admin.alter_consumer_group_offsets([request])[group].result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            raise ConnectError(f"Failed to alter consumer group offsets for connector {name}: {exc}") from exc

    def _delete_group(self, name: str, props: Mapping[str, str]) -> None:
        """Delete a sink connector's consumer group (and so its committed offsets); none is no error.

        DeleteGroups is an admin request only, and librdkafka's parser of its answer does not touch a
        consumer group (no #5040 path), so it stays on the admin client."""
        group = connector_offsets.sink_group_id(name, props)
        admin, _settings = self._admin_for(name, props)
        try:
            admin.delete_consumer_groups([group])[group].result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            if not _is(exc, KafkaError.GROUP_ID_NOT_FOUND):
                raise ConnectError(
                    f"Failed to reset consumer group offsets for connector {name}: {exc}"
                ) from exc

    def reset_offsets(self, name: str) -> str:
        """``DELETE /connectors/<name>/offsets`` (KIP-875): tombstones for every known source partition, or
        the sink's whole consumer group deleted, with the same stopped-connector rule and veto as
        :meth:`alter_offsets`."""
        connector, props = self._check_modifiable(name)
        if isinstance(connector, SourceConnector):
            state = self.worker.source_offsets()
            known = state.records.get(name, {})
            records = [SourceOffset(name, known[p].partition, None) for p in sorted(known)]
            handled = _ask(connector.alter_offsets, props, [(r.partition, None) for r in records])
            self.worker.write_source_offsets(records)
            return connector_offsets.modified_message(True, handled)
        assert isinstance(connector, SinkConnector)
        committed = self._committed(name, props)
        handled = _ask(connector.alter_offsets, props, {TopicPartition(t, p): None for t, p in committed})
        self._delete_group(name, props)
        return connector_offsets.modified_message(True, handled)

    # -- active topics (KIP-558) ---------------------------------------------------------------

    def topics(self, name: str) -> dict[str, dict[str, list[str]]]:
        """Topics the connector's tasks used, from ``status-topic-<topic>:connector-<name>`` records.

        Java answers for any name, known or not (an unknown one has no topics).
        """
        if not self.worker.config.topic_tracking_enable:
            raise ForbiddenError("Topic tracking is disabled.")
        return {name: {"topics": [t.topic for t in self.worker.status_state().topics(name)]}}

    def reset_topics(self, name: str) -> None:
        """Tombstone every active-topic record of the connector (any worker may write statuses)."""
        if not self.worker.config.topic_tracking_enable:
            raise ForbiddenError("Topic tracking is disabled.")
        if not self.worker.config.topic_tracking_allow_reset:
            raise ForbiddenError("Topic tracking reset is disabled.")
        self.worker.reset_active_topics(name)


def _is(exc: KafkaException, code: int) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() == code


def _ask(alter: Any, props: Mapping[str, str], offsets: Any) -> bool:
    """Ask the connector about the new offsets; its refusal is the caller's bad input (400)."""
    try:
        return bool(alter(props, offsets))
    except ConnectorError as exc:
        raise BadRequestError(str(exc)) from exc
