"""``kconnect apply -f FILE|DIR [--dry-run] [--prune]``: make a Connect cluster's connectors what a set of
files says, through the REST API (kconnect's or Apache Kafka Connect's).

The shell around :mod:`kconnect.runtime.cli.apply_plan`: it reads the files, fetches every stored
config in one ``GET /connectors?expand=info``, validates each config it would write with
``PUT /connector-plugins/{class}/config/validate`` before writing any, then creates
(``POST /connectors``), updates (``PUT /connectors/{name}/config``) and, with ``--prune``, deletes.
Nothing is written when a file or a validation fails; ``--dry-run`` stops after printing the plan.
Exit statuses are apply_plan's ``EXIT_*`` (0 nothing changed, 1 failed, 3 changed; 2 a bad command
line).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from kconnect.runtime.cli.apply_plan import (
    EXIT_CHANGED,
    EXIT_FAILED,
    EXIT_UNCHANGED,
    SUFFIXES,
    Desired,
    Kind,
    SpecError,
    Step,
    collect,
    parse_connectors,
    plan,
    render_plan,
)
from kconnect.runtime.cli.rest_client import DEFAULT_URL, ClientError, ConnectClient

__all__ = ["add_parser", "read_desired", "run", "validation_errors"]


def _files(target: Path) -> list[Path]:
    """The files to read: ``target`` itself, or a directory's files with a known ending, recursively and
    sorted, hidden ones (editor and VCS leftovers) skipped."""
    if target.is_dir():
        return sorted(
            p
            for p in target.rglob("*")
            if p.is_file()
            and p.suffix.lower() in SUFFIXES
            and not any(part.startswith(".") for part in p.relative_to(target).parts)
        )
    return [target]


def read_desired(targets: list[str]) -> dict[str, Desired]:
    """Every desired connector the ``-f`` arguments name; raises SpecError for the first bad file."""
    found: list[Desired] = []
    for target in targets:
        path = Path(target)
        if not path.exists():
            raise SpecError(target, "no such file or directory")
        for file in _files(path):
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise SpecError(str(file), f"cannot be read: {exc}") from None
            found += parse_connectors(str(file), text)
    if not found:
        raise SpecError(", ".join(targets), f"holds no connector file ({', '.join(SUFFIXES)})")
    return collect(found)


def validation_errors(answer: Any) -> list[str]:
    """``key: message`` for each error in a validate answer (Connect's ConfigInfos); the config-level
    ones (no key) as the message alone."""
    out: list[str] = []
    for entry in (answer or {}).get("configs") or []:
        value = entry.get("value") or {}
        for error in value.get("errors") or []:
            out.append(f"{value.get('name')}: {error}")
    if not out and (answer or {}).get("error_count"):
        out.append(f"{answer.get('error_count')} error(s) without a key")
    return out


def _stored(client: ConnectClient) -> dict[str, Mapping[str, str | None]]:
    """Every connector's stored config from one listing; ``GET /connectors/{name}/config`` answers the same
    unresolved config, one connector a call."""
    body = client.list(expand=("info",))
    if isinstance(body, list):  # a server without ?expand (Connect before 2.3): one call per connector
        return {name: client.get(name).get("config", {}) for name in body}
    return {name: (entry.get("info") or {}).get("config", {}) for name, entry in body.items()}


def _validate(client: ConnectClient, steps: list[Step], err: TextIO) -> bool:
    """Validate every config about to be written; print each failure per key; True when all pass."""
    ok = True
    for step in steps:
        try:
            answer = client.validate(step.config["connector.class"], step.config)
        except ClientError as exc:
            print(f"kconnect apply: {step.name} ({step.source}) cannot be validated: {exc.message}", file=err)
            ok = False
            continue
        errors = validation_errors(answer)
        for error in errors:
            print(f"kconnect apply: {step.name} ({step.source}) is invalid: {error}", file=err)
        ok = ok and not errors
    return ok


def _carry_out(client: ConnectClient, steps: list[Step], err: TextIO) -> list[str]:
    """Write each step; a failed call is reported and the others still go ahead. The names that failed."""
    failed = []
    for step in steps:
        try:
            if step.kind is Kind.CREATE:
                client.create(step.name, step.config)
            elif step.kind is Kind.UPDATE:
                client.put_config(step.name, step.config)
            elif step.kind is Kind.DELETE:
                client.delete(step.name)
        except ClientError as exc:
            where = f" (HTTP {exc.status})" if exc.status is not None else ""
            print(f"kconnect apply: {step.kind.value} {step.name} failed: {exc.message}{where}", file=err)
            failed.append(step.name)
    return failed


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """One ``kconnect apply``; returns its exit status (see the module's docstring)."""
    from kconnect.runtime.cli.rest_client import _auth

    try:
        desired = read_desired(args.file)
    except SpecError as exc:
        print(f"kconnect apply: {exc}; nothing changed", file=err, flush=True)
        return EXIT_FAILED
    try:
        with ConnectClient(args.url, auth=_auth(args.user)) as client:
            the_plan = plan(desired, _stored(client), prune=args.prune)
            writes = the_plan.of(Kind.CREATE, Kind.UPDATE)
            if not _validate(client, writes, err):
                print(render_plan(the_plan, dry_run=True), file=out, flush=True)
                print("kconnect apply: invalid connector configs; nothing changed", file=err, flush=True)
                return EXIT_FAILED
            failed = [] if args.dry_run else _carry_out(client, [*writes, *the_plan.of(Kind.DELETE)], err)
    except ClientError as exc:
        where = f" (HTTP {exc.status})" if exc.status is not None else ""
        print(f"kconnect apply: {exc.message}{where}", file=err, flush=True)
        return EXIT_FAILED
    print(render_plan(the_plan, dry_run=args.dry_run, failed=failed), file=out, flush=True)
    if failed:
        return EXIT_FAILED
    return EXIT_CHANGED if the_plan.changes_anything else EXIT_UNCHANGED


def add_parser(sub: Any) -> None:
    """Register ``kconnect apply`` on the main command's subparsers."""
    p = sub.add_parser(
        "apply",
        help="make the cluster's connectors what files say (create, update, --prune deletes)",
        description="Exit status: 0 nothing changed, 1 a file, validation or REST call failed, "
        "2 bad command line, 3 connectors were created, updated or deleted (--dry-run: would be).",
    )
    p.add_argument(
        "-f",
        "--file",
        action="append",
        required=True,
        help="a connector file (.json, .yaml, .yml, .properties) or a directory of them; repeatable",
    )
    p.add_argument("--dry-run", action="store_true", help="print the diff per connector, change nothing")
    p.add_argument("--prune", action="store_true", help="delete connectors that no file names")
    p.add_argument(
        "--url", default=DEFAULT_URL, help=f"a worker's REST URL (default {DEFAULT_URL}, $KCONNECT_URL)"
    )
    p.add_argument("--user", default=os.environ.get("KCONNECT_USER"), help="USER:PASSWORD for basic auth")
    p.set_defaults(func=run)
