"""``kconnect group describe``: a group as its records in the group-records topic describe it.

Read-only and worker-free on purpose: when a Connect cluster misbehaves (no leader, a rebalance that
never ends, work waiting for a worker that vanished) its REST API may be the thing that does not answer,
while the compacted topic still says what the group decided. The command reads the topic to its end with
the same read-to-end log the workers use, folds it with the same pure ``apply``, and prints the same
``describe`` view as ``GET /group`` (``--json``) or as a table for people.

Exit statuses: 0 described; 1 the broker could not be reached or the topic read did not finish in time;
2 the group has no records (unknown group or missing topic) or the command line is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kconnect.config.worker import GROUP_RECORDS_TOPIC_SUFFIX
from kconnect.runtime.group.group_records import GroupRecords, apply
from kconnect.runtime.group.group_view import describe

EXIT_UNREACHABLE = 1
EXIT_UNKNOWN = 2

#: Default group-records topic: ``<group.id>`` plus this suffix, exactly as the worker derives it.
TOPIC_SUFFIX = GROUP_RECORDS_TOPIC_SUFFIX


class GroupDescribeError(RuntimeError):
    """The records could not be read; ``exit_code`` says why (see the module docstring)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def read_group_records(
    bootstrap_servers: str, topic: str, timeout_s: float, client_settings: Mapping[str, str] | None = None
) -> GroupRecords:
    """Every record of ``topic`` up to its current end, folded. The shell around the pure fold."""
    from confluent_kafka import KafkaException

    from kconnect.runtime.storage.kafka_log import KafkaLog, KafkaLogError, LogRecord

    folded = GroupRecords()
    lock = threading.Lock()

    def on_record(record: LogRecord) -> None:
        nonlocal folded
        with lock:
            folded = apply(
                folded, record.key, record.value, offset=record.offset, timestamp_ms=record.timestamp_ms
            )

    # librdkafka's own log lines (connection refused, retries) would bury the one-line error; the
    # exceptions below carry what the user needs.
    quiet = {"log_level": "0", "allow.auto.create.topics": "false"}
    reader = KafkaLog(
        topic,
        bootstrap_servers,
        on_record,
        client_id=f"kconnect-group-describe-{uuid.uuid4().hex[:8]}",
        consumer_overrides=quiet,
        producer_overrides={"log_level": "0"},
        client_settings=client_settings,
    )
    try:
        try:
            reader.start(timeout_s)
        except KafkaLogError as exc:
            raise GroupDescribeError(
                f"no group records: the topic '{topic}' does not exist at {bootstrap_servers}", EXIT_UNKNOWN
            ) from exc
        except KafkaException as exc:
            raise GroupDescribeError(
                f"could not reach the Kafka cluster at {bootstrap_servers} within {timeout_s:g} s "
                f"({exc.args[0].str() if exc.args else exc})",
                EXIT_UNREACHABLE,
            ) from exc
        try:
            done = reader.read_to_end(timeout_s)
        except KafkaLogError as exc:
            raise GroupDescribeError(str(exc), EXIT_UNREACHABLE) from exc
        if not done:
            raise GroupDescribeError(
                f"could not read '{topic}' to its end within {timeout_s:g} s", EXIT_UNREACHABLE
            )
    finally:
        reader.stop()
    with lock:
        return folded


# ---------------------------------------------------------------------------------------------------
# The table


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return lines


def _work(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "-"
    items = list(entry["connectors"]) + list(entry["tasks"])
    return ", ".join(items) if items else "(nothing)"


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _items(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "-"
    return ", ".join(list(entry["connectors"]) + list(entry["tasks"])) or "-"


def _epochs(rec: dict[str, Any]) -> list[str]:
    """The reconciliation section: the group and assignment epochs, then each member's epoch, the
    coordinator's verdict and what it still has to revoke or receive."""

    def epoch(value: int | None) -> str:
        return "-" if value is None else str(value)

    how = "reconciled (group.protocol=connect)" if rec["reconciled"] else "not reconciled (classic rounds)"
    if rec["assignment_epoch"] is None:
        how = "no target"
    out = [f"epochs: group {epoch(rec['group_epoch'])}, assignment {epoch(rec['assignment_epoch'])}, {how}:"]
    rows = [
        [
            m["member_id"],
            epoch(m["member_epoch"]),
            m["verdict"] or "-",
            _items(m["to_revoke"]),
            _items(m["to_receive"]),
        ]
        for m in rec["members"]
    ]
    if rows:
        out += _table(["MEMBER", "MEMBER EPOCH", "VERDICT", "TO REVOKE", "TO RECEIVE"], rows)
    else:
        out.append("  (none)")
    return out


def _learners(view: dict[str, Any]) -> list[str]:
    """The warm-up section: each task being learned, by whom, as the coordinator's target names it and as
    the learner's own current record reports it (the two differ until the learner reports ready and the
    coordinator reads that back), and since when."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for side in ("target", "current"):
        members = (view["target"] or {}).get("members", []) if side == "target" else view["current"]
        for m in members:
            for learner in m.get("learners", []):
                row = seen.setdefault((m["member_id"], learner["task"]), {"since_ms": learner["since_ms"]})
                row[side] = "ready" if learner["is_ready"] else "learning"
    if not seen:
        return ["learners: none"]
    rows = [
        [member, task, row.get("target", "-"), row.get("current", "-"), _when(row["since_ms"])]
        for (member, task), row in sorted(seen.items())
    ]
    return [f"learners ({len(rows)}):", *_table(["MEMBER", "TASK", "TARGET", "REPORTED", "SINCE"], rows)]


def render_text(view: dict[str, Any]) -> str:
    """``describe``'s view as a few readable sections (group, members, target vs current, learners, epochs,
    delay)."""
    out = [f"group {view['group']}   epoch {view['epoch'] if view['epoch'] is not None else '-'}"]
    ct = view["connectors_tasks"]
    if ct is not None:
        out.append(
            f"connectors and tasks (epoch {ct['epoch']}): {len(ct['connectors'])} connectors, "
            f"{len(ct['tasks'])} tasks: {_work(ct)}"
        )
    out.append("")
    out.append(f"members ({len(view['members'])}):")
    rows = []
    for m in view["members"]:
        connect = next((a["metadata"] for a in m["assignors"] if a["metadata"] is not None), None)
        rows.append(
            [
                m["member_id"],
                connect["url"] if connect else "-",
                str(connect["config_offset"]) if connect else "-",
                str(m["group_epoch"]),
                ",".join(f"{a['name']}/v{a['version']}" for a in m["assignors"]) or "-",
                m["client_id"] or "-",
                m["client_host"] or "-",
            ]
        )
    if rows:
        out += _table(["MEMBER", "URL", "CONFIG OFFSET", "EPOCH", "PROTOCOLS", "CLIENT", "HOST"], rows)
    else:
        out.append("  (none)")
    out.append("")
    target = view["target"]
    current = {c["member_id"]: c for c in view["current"]}
    targets = {t["member_id"]: t for t in target["members"]} if target else {}
    title = f"assignment: target (epoch {target['assignment_epoch']})" if target else "assignment: no target"
    out.append(title + " vs current:")
    rows = []
    for member_id in sorted(set(targets) | set(current)):
        t, c = targets.get(member_id), current.get(member_id)
        note = []
        if member_id in view["vanished"]:
            note.append("vanished")
        if t is not None and t["error"]:
            note.append(f"error {t['error']}")
        if t is not None and t["assignment"] and t["assignment"]["delay_ms"]:
            note.append(f"delay {t['assignment']['delay_ms']} ms")
        rows.append(
            [
                member_id,
                _work(t),
                _work(c),
                str(c["member_epoch"]) if c else "-",
                "; ".join(note),
            ]
        )
    if rows:
        out += _table(["MEMBER", "TARGET", "CURRENT", "MEMBER EPOCH", "NOTE"], rows)
    else:
        out.append("  (none)")
    out.append("")
    out += _learners(view)
    out.append("")
    out += _epochs(view["reconciliation"])
    scheduled = view["scheduled_rebalance"]
    out.append("")
    if scheduled is None:
        out.append("scheduled rebalance: none")
    else:
        out.append(
            f"scheduled rebalance: due {_when(scheduled['due_ms'])} "
            f"(in {scheduled['remaining_ms'] / 1000:.1f} s)"
        )
    if view["vanished"]:
        out.append(f"vanished members, their work awaits their return: {', '.join(view['vanished'])}")
    if view["configuration"]:
        out.append("")
        out.append("configuration:")
        out += [f"  {k} = {v}" for k, v in sorted(view["configuration"].items())]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------
# The command


def command_config(path: str | None) -> dict[str, str]:
    """Client settings from a properties file, as Apache Kafka's tools take them (``--command-config``):
    Java names (``security.protocol``, ``sasl.jaas.config``, ``ssl.truststore.location``) translated."""
    if path is None:
        return {}
    from kconnect.config.properties import load_properties
    from kconnect.runtime.client_config import to_librdkafka

    return to_librdkafka("consumer", load_properties(path)).settings


def cmd_group_describe(args: argparse.Namespace) -> int:
    """The command's entry point: read the group-records topic without joining the group, fold it and print
    the group's view; an unreachable broker or an unknown group is a message on stderr and a distinct exit
    status, never a traceback."""
    from kconnect.runtime import logs

    logs.configure(args.log_level)
    topic = args.topic or f"{args.group}{TOPIC_SUFFIX}"
    try:
        settings = command_config(args.command_config)
    except (OSError, ValueError) as exc:  # ConfigError and the properties syntax error are ValueErrors
        print(f"kconnect: --command-config: {exc}", file=sys.stderr, flush=True)
        return EXIT_UNKNOWN
    try:
        records = read_group_records(args.bootstrap_server, topic, args.timeout, settings)
    except GroupDescribeError as exc:
        print(f"kconnect: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    state = records.groups.get(args.group)
    if state is None:
        known = ", ".join(sorted(records.groups)) or "none"
        print(
            f"kconnect: unknown group '{args.group}': the topic '{topic}' holds no records of it "
            f"(groups found: {known})",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_UNKNOWN
    view = describe(state, now_ms=int(time.time() * 1000))
    if args.json:
        print(json.dumps(view, indent=2))
    else:
        print(render_text(view), end="")
    return 0


def register(sub: Any) -> None:
    """Add ``group describe`` to the ``kconnect`` command's subparsers."""
    group = sub.add_parser("group", help="inspect a Connect group through its group-records topic")
    actions = group.add_subparsers(dest="group_command", required=True)
    p = actions.add_parser(
        "describe",
        help="describe a group from its group-records topic (no worker needed)",
        description="Read the group-records topic to its end and print the group it describes.",
    )
    p.add_argument("--bootstrap-server", required=True, help="HOST:PORT of the Kafka cluster")
    p.add_argument("--group", required=True, help="the Connect cluster's group.id")
    p.add_argument("--topic", help=f"the group-records topic (default: <group>{TOPIC_SUFFIX})")
    p.add_argument("--json", action="store_true", help="print the JSON that GET /group answers with")
    p.add_argument(
        "--timeout", type=float, default=15.0, help="seconds to reach the cluster and read the topic"
    )
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="a properties file of Kafka client settings (security.protocol, ssl.*, sasl.*), Java names",
    )
    p.add_argument("--log-level", default="WARNING")
    p.set_defaults(func=cmd_group_describe)
