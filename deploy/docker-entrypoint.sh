#!/bin/sh
# Entrypoint of the kconnect worker image (deploy/Dockerfile); also usable on a bare host.
#
#   docker-entrypoint.sh [kconnect worker options...]
#
# Environment:
#   KCONNECT_PROPERTIES                 worker properties file (default /etc/kconnect/worker.properties).
#                                       ${env:NAME} and ${file:PATH:KEY} references in it are resolved by
#                                       the worker itself, exactly as `kconnect worker FILE` does.
#   KCONNECT_STATIC_TASK_FROM_HOSTNAME  a connector name. When set, the worker's static.tasks is derived
#                                       from the pod name: a StatefulSet pod is named <set>-<ordinal>, so
#                                       pod "orders-worker-3" with KCONNECT_STATIC_TASK_FROM_HOSTNAME=orders
#                                       gets static.tasks=orders-3: one pod per task (KIP-987). The value
#                                       replaces any static.tasks in the properties file.
#   KCONNECT_POD_NAME                   the pod name to derive from (default: $HOSTNAME, then `hostname`).
#   KCONNECT_RUNTIME_DIR                where the derived properties file is written (default $TMPDIR or
#                                       /tmp): the mounted file is read-only and is never changed.
#
# The script ends by exec-ing `kconnect worker`, so the worker is the process that receives SIGTERM
# (from `docker stop`, the kubelet or systemd) and hands its tasks over before it leaves the group.
set -eu

fail() {
    echo "docker-entrypoint.sh: $*" >&2
    exit 2 # the status `kconnect worker` uses for bad configuration
}

props="${KCONNECT_PROPERTIES:-/etc/kconnect/worker.properties}"
[ -f "$props" ] && [ -r "$props" ] ||
    fail "worker properties file '$props' is missing or unreadable (mount one there or set KCONNECT_PROPERTIES)"

connector="${KCONNECT_STATIC_TASK_FROM_HOSTNAME:-}"
if [ -n "$connector" ]; then
    case "$connector" in
    *,* | *\\* | *"
"*)
        fail "KCONNECT_STATIC_TASK_FROM_HOSTNAME='$connector' must be one connector name (no comma, backslash or newline)"
        ;;
    esac
    # HOSTNAME here is the environment variable Docker and the kubelet set (the pod name), not bash's.
    # shellcheck disable=SC3028
    pod="${KCONNECT_POD_NAME:-${HOSTNAME:-}}"
    [ -n "$pod" ] || pod="$(hostname 2>/dev/null || uname -n)"
    ordinal="${pod##*-}"
    case "$pod" in
    *-*) ;;
    *) ordinal="" ;;
    esac
    case "$ordinal" in
    "" | *[!0-9]*)
        fail "KCONNECT_STATIC_TASK_FROM_HOSTNAME is set but pod name '$pod' does not end in -<ordinal> (a StatefulSet pod name, e.g. $connector-worker-0)"
        ;;
    esac
    # StatefulSet ordinals have no leading zeros; strip any so that "w-007" means task 7.
    ordinal="$(printf '%s' "$ordinal" | sed 's/^0*\(.\)/\1/')"
    runtime_dir="${KCONNECT_RUNTIME_DIR:-${TMPDIR:-/tmp}}"
    derived="$(mktemp "$runtime_dir/kconnect-worker.XXXXXX")" ||
        fail "cannot write the derived properties file in '$runtime_dir' (set KCONNECT_RUNTIME_DIR)"
    {
        cat "$props"
        # Two line breaks end a trailing '\' continuation of the original file before our key (Java
        # properties: the last occurrence of a key wins).
        printf '\n\n# docker-entrypoint.sh: from pod name %s\nstatic.tasks=%s-%s\n' "$pod" "$connector" "$ordinal"
    } >"$derived"
    echo "docker-entrypoint.sh: pod $pod runs static.tasks=$connector-$ordinal ($derived)" >&2
    props="$derived"
fi

exec kconnect worker "$props" "$@"
