"""deploy/: the image definition, the manifests and the unit file pass their validators and agree.

No container engine runs here, so nothing is built or started: hadolint lints the Dockerfile,
kubernetes-validate checks the manifests against a current Kubernetes' OpenAPI schemas, the compose file
is validated against the Compose specification's JSON schema (as vendored by check-jsonschema), and the
worker properties every deployment ships are loaded with the worker's own parser and validator. The
entrypoint script runs here with a stand-in ``kconnect`` on PATH (the real worker runs it in
tests/integration/test_entrypoint.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from kconnect.config.errors import ConfigError
from kconnect.config.properties import load_properties, parse_properties, substitute
from kconnect.config.worker import WorkerConfig, unknown_keys
from kconnect.runtime.cli.main import load_worker_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
ENTRYPOINT = DEPLOY / "docker-entrypoint.sh"
#: The Kubernetes release the manifests are validated against (the newest kubernetes-validate 1.37.0 has).
KUBERNETES_VERSION = "1.37.0"


def _tool(name: str) -> str:
    """A validator installed by the test extra, next to this interpreter (or on PATH)."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    assert found, f"{name} is missing: install the test extra (pip install -e '.[test]')"
    return found


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _worker_config(text: str, env: dict[str, str]) -> WorkerConfig:
    """Parse, substitute and validate worker properties exactly as ``kconnect worker`` does."""
    props = substitute(parse_properties(text), env)
    assert unknown_keys(props) == [], "deployment properties must not carry keys the worker ignores"
    return WorkerConfig.from_properties(props)


# ============================================================================================ Dockerfile


def test_dockerfile_passes_hadolint() -> None:
    hadolint = _tool("hadolint")
    result = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "info", str(DEPLOY / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_hadolint_rejects_a_bad_dockerfile(tmp_path: Path) -> None:
    """The check above can fail: hadolint flags an unpinned base image and a root user."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get update && apt-get install -y curl\nUSER root\n")
    result = subprocess.run([_tool("hadolint"), "--no-color", str(bad)], capture_output=True, text=True)
    assert result.returncode != 0
    assert "DL3007" in result.stdout and "DL3002" in result.stdout


def _instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_image_runs_the_entrypoint_as_a_non_root_user_with_java_17() -> None:
    ins = _instructions()
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", text, re.M)
    assert "openjdk-17-jre-headless" in text
    users = [rest for word, rest in ins if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the image must not run as root"
    assert users[-1].split(":")[0].isdigit(), "a numeric USER lets Kubernetes check runAsNonRoot"
    entrypoint = json.loads(next(rest for word, rest in ins if word == "ENTRYPOINT"))
    assert entrypoint[-1] == "/usr/local/bin/docker-entrypoint.sh"
    assert entrypoint[0].endswith("tini"), "an init as PID 1 forwards SIGTERM and reaps Spark's children"
    assert "kconnect-*.whl" in text, "kconnect is installed from the repository's own wheel"


def test_image_copies_only_what_exists_and_the_dockerignore_keeps() -> None:
    """docker build cannot run here; at least every COPY source exists and is in the build context."""
    ignore = [
        line.strip()
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignore[0] == "*"
    kept = {p[1:].rstrip("/") for p in ignore if p.startswith("!")}
    sources = []
    for word, rest in _instructions():
        if word == "COPY" and "--from=" not in rest:
            args = [a for a in rest.split() if not a.startswith("--")]
            sources += [a.rstrip("/") for a in args[:-1]]
    assert sources, "the Dockerfile copies the repository"
    for src in sources:
        assert (ROOT / src).exists(), f"COPY {src}: no such path in the repository"
        assert src in kept, f"COPY {src}: excluded by deploy/Dockerfile.dockerignore"
    # Every package folder the wheel is built from is copied (pyproject's package-dir).
    assert {"runtime", "rest", "config", "connectors", "pyproject.toml"} <= set(sources)


# ========================================================================================= entrypoint


def test_entrypoint_passes_shellcheck_as_posix_sh() -> None:
    result = subprocess.run(
        [_tool("shellcheck"), "--shell=sh", str(ENTRYPOINT)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert os.access(ENTRYPOINT, os.X_OK), "the entrypoint must be executable"


@pytest.fixture
def fake_kconnect(tmp_path: Path) -> Path:
    """A stand-in ``kconnect`` that records its pid, arguments and the properties file it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record"
    script = bin_dir / "kconnect"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$$" > "{record}.pid"\n'
        f'printf "%s\\n" "$@" > "{record}.args"\n'
        f'cp "$2" "{record}.properties"\n'
    )
    script.chmod(0o755)
    return tmp_path


def _run_entrypoint(
    workdir: Path, props_text: str | None, **env: str
) -> tuple[subprocess.CompletedProcess[str], int]:
    props = workdir / "worker.properties"
    if props_text is not None:
        props.write_text(props_text)
    base = {k: v for k, v in os.environ.items() if not k.startswith("KCONNECT_")}
    base.update(
        PATH=f"{workdir / 'bin'}{os.pathsep}{os.environ['PATH']}",
        KCONNECT_PROPERTIES=str(props),
        KCONNECT_RUNTIME_DIR=str(workdir),
        **env,
    )
    proc = subprocess.Popen(
        [str(ENTRYPOINT), "--log-level", "DEBUG"],
        env=base,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


WORKER_FILE = (
    "bootstrap.servers=${env:BOOTSTRAP}\n"
    "group.id=g\n"
    "config.storage.topic=c\noffset.storage.topic=o\nstatus.storage.topic=s\n"
    "key.converter=json\nvalue.converter=json\n"
    "static.tasks=stale-0\n"
    "rest.advertised.host.name=a\\"  # a trailing continuation must not swallow the added key
)


def test_entrypoint_execs_kconnect_worker_with_the_properties_file(fake_kconnect: Path) -> None:
    result, pid = _run_entrypoint(fake_kconnect, WORKER_FILE)
    assert result.returncode == 0, result.stderr
    args = (fake_kconnect / "record.args").read_text().split()
    assert args == ["worker", str(fake_kconnect / "worker.properties"), "--log-level", "DEBUG"]
    # exec: the worker is the process that was started, so SIGTERM sent to it reaches the worker.
    assert int((fake_kconnect / "record.pid").read_text()) == pid


def test_entrypoint_derives_static_tasks_from_a_statefulset_pod_name(
    fake_kconnect: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, _ = _run_entrypoint(
        fake_kconnect,
        WORKER_FILE,
        KCONNECT_STATIC_TASK_FROM_HOSTNAME="orders",
        KCONNECT_POD_NAME="kconnect-orders-3",
    )
    assert result.returncode == 0, result.stderr
    assert "static.tasks=orders-3" in result.stderr
    args = (fake_kconnect / "record.args").read_text().split()
    derived = Path(args[1])
    assert derived != fake_kconnect / "worker.properties" and derived.parent == fake_kconnect
    assert (fake_kconnect / "worker.properties").read_text() == WORKER_FILE, "the mounted file is untouched"
    props = load_properties(fake_kconnect / "record.properties")
    assert props["static.tasks"] == "orders-3" and props["rest.advertised.host.name"] == "a"
    # The worker itself accepts the derived file (substitution and validation as `kconnect worker`).
    monkeypatch.setenv("BOOTSTRAP", "kafka:9092")
    config = load_worker_config(str(fake_kconnect / "record.properties"))
    assert config.static_tasks == ("orders-3",)
    assert config.bootstrap_servers == ("kafka:9092",)


@pytest.mark.parametrize(
    ("pod", "task"), [("orders-worker-0", "orders-0"), ("w-12", "orders-12"), ("w-007", "orders-7")]
)
def test_entrypoint_takes_the_ordinal_after_the_last_dash(fake_kconnect: Path, pod: str, task: str) -> None:
    result, _ = _run_entrypoint(
        fake_kconnect, WORKER_FILE, KCONNECT_STATIC_TASK_FROM_HOSTNAME="orders", HOSTNAME=pod
    )
    assert result.returncode == 0, result.stderr
    assert load_properties(fake_kconnect / "record.properties")["static.tasks"] == task


@pytest.mark.parametrize(
    ("env", "props", "message"),
    [
        ({"KCONNECT_POD_NAME": "standalone"}, WORKER_FILE, "does not end in -<ordinal>"),
        ({"KCONNECT_POD_NAME": "worker-a"}, WORKER_FILE, "does not end in -<ordinal>"),
        ({"KCONNECT_STATIC_TASK_FROM_HOSTNAME": "a,b"}, WORKER_FILE, "one connector name"),
        ({}, None, "missing or unreadable"),
    ],
)
def test_entrypoint_refuses_what_it_cannot_derive_with_status_2(
    fake_kconnect: Path, env: dict[str, str], props: str | None, message: str
) -> None:
    env = {"KCONNECT_STATIC_TASK_FROM_HOSTNAME": "orders", "KCONNECT_POD_NAME": "p-1", **env}
    if props is None:
        env.pop("KCONNECT_STATIC_TASK_FROM_HOSTNAME")
    result, _ = _run_entrypoint(fake_kconnect, props, **env)
    assert result.returncode == 2
    assert message in result.stderr
    assert not (fake_kconnect / "record.args").exists(), "the worker must not start"


# ========================================================================================== Kubernetes


def _manifests() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for doc in _documents(path):
            if doc["kind"] != "Kustomization":
                out.append((path, doc))
    return out


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in _manifests() if doc["kind"] == kind]


def test_manifests_validate_against_a_current_kubernetes() -> None:
    manifests = _manifests()
    kinds = sorted({doc["kind"] for _, doc in manifests})
    assert kinds == ["ConfigMap", "PodDisruptionBudget", "Service", "StatefulSet"]
    failures = []
    for path, doc in manifests:
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            failures.append(f"{path.name} {doc['kind']}/{doc['metadata']['name']}: {exc.message}")
    assert not failures, "\n".join(failures)


def test_kubernetes_validate_rejects_a_misspelt_field() -> None:
    statefulset = _by_kind("StatefulSet")[0]
    bad = json.loads(json.dumps(statefulset))
    bad["spec"]["template"]["spec"]["terminationGracePeriod"] = 90
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)


def test_kustomization_lists_the_base_manifests() -> None:
    (kustomization,) = _documents(KUBERNETES / "kustomization.yaml")
    base = {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml", "static-workers.yaml"}
    assert set(kustomization["resources"]) == base


def _container(statefulset: dict[str, Any]) -> dict[str, Any]:
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    return container


def _config_map_for(statefulset: dict[str, Any]) -> dict[str, Any]:
    volumes = statefulset["spec"]["template"]["spec"]["volumes"]
    name = next(v["configMap"]["name"] for v in volumes if "configMap" in v)
    return next(cm for cm in _by_kind("ConfigMap") if cm["metadata"]["name"] == name)


def _labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


POD_ENV = {"POD_NAME": "kconnect-0", "POD_IP": "10.0.0.7"}


@pytest.mark.parametrize("name", ["kconnect", "kconnect-orders"])
def test_statefulset_probes_health_and_gives_the_hand_over_time(name: str) -> None:
    statefulset = next(s for s in _by_kind("StatefulSet") if s["metadata"]["name"] == name)
    pod = statefulset["spec"]["template"]
    container = _container(statefulset)
    port = next(p for p in container["ports"] if p["name"] == "http")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe

    config = _worker_config(_config_map_for(statefulset)["data"]["worker.properties"], POD_ENV)
    assert config.rest_listeners[0].port == port["containerPort"]
    assert config.rest_advertised_host_name == "10.0.0.7"
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    needed = (
        int(pre_stop[1])
        + config.rebalance_timeout_ms / 1000
        + config.task_shutdown_graceful_timeout_ms / 1000
    )
    assert pod["spec"]["terminationGracePeriodSeconds"] > needed, "SIGKILL would cut the hand-over short"

    security = pod["spec"]["securityContext"]
    assert security["runAsNonRoot"] and security["runAsUser"] != 0
    assert container["resources"]["limits"]["memory"] == container["resources"]["requests"]["memory"]

    # A headless Service governs the set, and a PodDisruptionBudget covers its pods one at a time.
    labels = pod["metadata"]["labels"]
    service = next(
        s for s in _by_kind("Service") if s["metadata"]["name"] == statefulset["spec"]["serviceName"]
    )
    assert service["spec"]["clusterIP"] == "None" and _labels_match(service["spec"]["selector"], labels)
    budgets = [
        b
        for b in _by_kind("PodDisruptionBudget")
        if _labels_match(b["spec"]["selector"]["matchLabels"], labels)
    ]
    assert len(budgets) == 1 and budgets[0]["spec"]["maxUnavailable"] == 1
    assert _labels_match(statefulset["spec"]["selector"]["matchLabels"], labels)


def test_static_workers_take_their_task_from_the_pod_name_with_their_own_limits() -> None:
    statefulset = next(s for s in _by_kind("StatefulSet") if s["metadata"]["name"] == "kconnect-orders")
    container = _container(statefulset)
    env = {e["name"]: e for e in container["env"]}
    connector = env["KCONNECT_STATIC_TASK_FROM_HOSTNAME"]["value"]
    assert env["KCONNECT_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    # Pod names are <set>-<ordinal>; the entrypoint maps them onto tasks <connector>-<ordinal>.
    pods = [f"{statefulset['metadata']['name']}-{i}" for i in range(statefulset["spec"]["replicas"])]
    assert [f"{connector}-{p.rsplit('-', 1)[1]}" for p in pods] == [
        f"orders-{i}" for i in range(statefulset["spec"]["replicas"])
    ]
    limits, requests = container["resources"]["limits"], container["resources"]["requests"]
    assert limits == requests and {"cpu", "memory"} <= set(limits), "one task, one guaranteed budget"

    static = _worker_config(_config_map_for(statefulset)["data"]["worker.properties"], POD_ENV)
    wildcard_set = next(s for s in _by_kind("StatefulSet") if s["metadata"]["name"] == "kconnect")
    wildcard = _worker_config(_config_map_for(wildcard_set)["data"]["worker.properties"], POD_ENV)
    assert static.connect_protocol == "static"
    assert static.static_tasks == ()  # added per pod by the entrypoint
    # Static workers join the wildcard workers' group, on the same internal topics.
    for key in ("group_id", "config_storage_topic", "offset_storage_topic", "status_storage_topic"):
        assert getattr(static, key) == getattr(wildcard, key), key


# ============================================================================================= compose


def _compose_schema() -> dict[str, Any]:
    """The Compose specification's schema as check-jsonschema vendors it (its ``vendor.compose-spec``)."""
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema: dict[str, Any] = json.loads(vendor.joinpath("compose-spec.json").read_text())
    assert schema["title"] == "Compose Specification"
    return schema


def _compose_errors(doc: Any) -> list[str]:
    schema = _compose_schema()
    cls = jsonschema.validators.validator_for(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def _compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return doc


def test_compose_file_validates_against_the_compose_specification() -> None:
    assert _compose_errors(_compose()) == []


def test_compose_schema_rejects_a_misspelt_key() -> None:
    bad = _compose()
    bad["services"]["kafka"]["helthcheck"] = bad["services"]["kafka"].pop("healthcheck")
    assert any("helthcheck" in e for e in _compose_errors(bad))


def test_compose_runs_kraft_kafka_three_workers_and_spark_under_a_profile() -> None:
    services = _compose()["services"]
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    workers = {n: s for n, s in services.items() if n.startswith("kconnect-")}
    assert len(workers) == 3
    spark = {n: s for n, s in services.items() if n.startswith("spark-")}
    assert set(spark) == {"spark-master", "spark-worker"}
    assert all(s["profiles"] == ["spark"] for s in spark.values())
    assert not any("profiles" in s for s in workers.values())

    properties = (DEPLOY / "compose" / "worker.properties").read_text()
    urls = set()
    for name, svc in workers.items():
        assert svc["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert "./compose/worker.properties:/etc/kconnect/worker.properties:ro" in svc["volumes"]
        assert svc["depends_on"]["kafka"]["condition"] == "service_healthy"
        env = {k: str(v) for k, v in svc["environment"].items()}
        # Compose interpolates ${VAR:-default} before the container sees it.
        env = {k: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", v) for k, v in env.items()}
        config = _worker_config(properties, env)
        assert config.spark_master == "local[*]"
        urls.add(f"{config.rest_advertised_host_name}:{config.rest_advertised_port}")
        assert config.rest_advertised_host_name == svc["hostname"] == name
        grace = int(svc["stop_grace_period"].rstrip("s"))
        assert grace > config.rebalance_timeout_ms / 1000, f"{name}: SIGKILL would cut the hand-over short"
        assert "/health" in " ".join(svc["healthcheck"]["test"])
    assert len(urls) == 3
    # With the profile, workers point spark.master at the standalone master the compose file runs.
    master = services["spark-master"]
    assert "org.apache.spark.deploy.master.Master" in master["entrypoint"]
    assert "spark://spark-master:7077" in services["spark-worker"]["command"]
    assert master["command"][master["command"].index("--port") + 1] == "7077"


# ============================================================================================= systemd


def _unit() -> dict[str, dict[str, list[str]]]:
    """systemd's syntax: [Section] headers, Key=Value lines, repeated keys accumulate, # and ; comments."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in (DEPLOY / "kconnect-worker.service").read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        assert current is not None, f"key outside a section: {line}"
        key, sep, value = line.partition("=")
        assert sep, f"not a Key=Value line: {line}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_systemd_unit_has_the_expected_keys() -> None:
    unit = _unit()
    assert set(unit) == {"Unit", "Service", "Install"}
    service = {k: v[-1] for k, v in unit["Service"].items()}
    assert "network-online.target" in unit["Unit"]["After"][0]
    assert service["Type"] == "exec"
    assert service["User"] not in ("root", "0")
    assert re.fullmatch(r"/\S+/kconnect worker \$\{KCONNECT_PROPERTIES\}", service["ExecStart"])
    assert "KCONNECT_PROPERTIES=/etc/kconnect/worker.properties" in unit["Service"]["Environment"]
    assert service["KillSignal"] == "SIGTERM" and service["KillMode"] == "mixed"
    assert int(service["TimeoutStopSec"]) > 60, "default rebalance.timeout.ms bounds the hand-over"
    assert service["Restart"] == "on-failure"
    assert service["RestartPreventExitStatus"] == "2", "an invalid properties file is not restarted"
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    # verify checks that ExecStart's program exists: point it at this checkout's kconnect.
    text = (DEPLOY / "kconnect-worker.service").read_text()
    unit = tmp_path / "kconnect-worker.service"
    unit.write_text(text.replace("/opt/kconnect/venv/bin/kconnect", _tool("kconnect")))
    result = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


# ============================================================================================ together


def test_every_deployment_reads_the_same_properties_path_the_image_defaults_to() -> None:
    default = "/etc/kconnect/worker.properties"
    assert f"KCONNECT_PROPERTIES={default}" in (DEPLOY / "Dockerfile").read_text()
    assert f'"${{KCONNECT_PROPERTIES:-{default}}}"' in ENTRYPOINT.read_text()
    for statefulset in _by_kind("StatefulSet"):
        container = _container(statefulset)
        env = {e["name"]: e.get("value") for e in container["env"]}
        mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
        assert env["KCONNECT_PROPERTIES"] == default == f"{mount['mountPath']}/worker.properties"


def test_an_unresolvable_env_reference_fails_the_way_the_worker_reports_it() -> None:
    """The deployments lean on ${env:...}: a missing variable is a clear error, not a literal value."""
    with pytest.raises(ConfigError, match=r"POD_(NAME|IP) is not set"):
        _worker_config(_config_map_for(_by_kind("StatefulSet")[0])["data"]["worker.properties"], {})
