"""Jars from Maven Central, copied once into kconnect's cache: the one fetch routine of the test support.

Apache Kafka's brokers (``apache_kafka.py``), Debezium (``debezium.py``), Apache Iceberg's Kafka Connect
sink (``iceberg_kafka_connect.py``), Spark's Iceberg and Delta runtimes (``lakehouse_jars.py``) and
Apache Iceberg's REST catalog server (``iceberg_rest.py``) each name their artifacts in a pom under
``tests/`` and need the same thing done with it: ``mvn dependency:copy-dependencies`` into a folder under
``~/.cache/kconnect/<name>`` (``$XDG_CACHE_HOME`` honoured), trusted only once the copy has finished. Why
one routine: it stood five times over, a dozen lines each, so a fix to one copy (a copy cut short, a run
that hangs, an error that says too little) had to be made five times or drifted.

The marker ``complete`` in the cache folder is written last, holding the pinned version(s): a copy that was
interrupted (Ctrl-C, a lost network, a full disk) has none, so the next call clears the folder and copies
again rather than trusting a partial set of jars. ``make kafka`` and ``make lakehouse`` call the same
functions ahead of ``make test``, so the tests normally find the cache filled.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kconnect.runtime.cli.cache_dir import kconnect_cache_dir

#: The file, in a cache folder, whose presence says the copy into it finished.
MARKER = "complete"
#: Seconds one ``mvn`` run may take: a cold ``~/.m2`` downloads a few hundred MB.
MVN_TIMEOUT_S = 900


def kconnect_cache(name: str) -> Path:
    """``$XDG_CACHE_HOME/kconnect/<name>``, or ``~/.cache/kconnect/<name>`` when it is unset or empty: the
    product's rule (:func:`kconnect_cache_dir`), which ``kconnect demo`` looks in."""
    return kconnect_cache_dir() / name


def is_fetched(home: Path) -> bool:
    """Whether a copy into ``home`` finished (its marker is there); reads only, never fetches."""
    return (home / MARKER).is_file()


def copy_dependencies(
    pom: Path,
    home: Path,
    into: str,
    *,
    what: str,
    stamp: str,
    error: type[Exception],
    settings: Path | None = None,
) -> Path:
    """``home / into`` holding the dependencies ``pom`` names, copied there by Maven unless ``home``'s
    marker says an earlier copy finished; the marker (``stamp``, the pinned versions) is written last.

    ``what`` names the artifacts in the errors (``"Apache Kafka 4.3.1"``); ``error`` is the caller's own
    exception type, raised when ``mvn`` is not on PATH, fails (with the tail of its output) or runs past
    :data:`MVN_TIMEOUT_S`. ``into`` is cleared before a copy, so jars of an interrupted one never stay.
    ``settings``: a Maven settings file (``-s``), for artifacts whose poms name repositories this project
    does not reach (``tests/schema-registry/settings.xml`` sends every one to Maven Central).
    """
    dest = home / into
    if is_fetched(home):
        return dest
    mvn = find_mvn(f"fetch {what}", error)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    goal = ["-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={dest}"]
    run_mvn(mvn, goal, what=f"fetch {what}", where=str(pom), error=error, settings=settings)
    (home / MARKER).write_text(stamp + "\n")
    return dest


def find_mvn(what: str, error: type[Exception]) -> str:
    """The ``mvn`` on PATH; ``error`` naming Maven and ``what`` it was needed to do when there is none."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(f"Maven (mvn) is needed to {what} from Maven Central")
    return mvn


def run_mvn(
    mvn: str,
    args: list[str],
    *,
    what: str,
    where: str,
    error: type[Exception],
    settings: Path | None = None,
    cwd: Path | None = None,
) -> None:
    """``mvn -q -B [-s settings] <args>`` (``mvn`` from :func:`find_mvn`), raising ``error`` when it fails
    (with the tail of its output) or runs past :data:`MVN_TIMEOUT_S`. ``what`` says what it was to do
    (``"fetch Apache Kafka 4.3.1"``), ``where`` which project (a pom's path)."""
    command = [mvn, "-q", "-B", *(["-s", str(settings)] if settings else []), *args]
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=MVN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise error(f"mvn did not {what} within {MVN_TIMEOUT_S} s ({where})") from exc
    if proc.returncode != 0:
        # With -q Maven prints its [ERROR] lines on stdout; stderr holds the JVM's own complaints.
        output = proc.stdout.strip() or proc.stderr.strip()
        raise error(f"mvn could not {what} ({where}): {output[-3000:]}")


def connect_plugin_path(
    pom: Path,
    home: Path,
    plugin: str,
    *,
    what: str,
    stamp: str,
    error: type[Exception],
    settings: Path | None = None,
) -> Path:
    """A Connect worker's ``plugin.path`` folder, ``home/plugins``, holding one plugin: ``pom``'s
    dependencies in a folder of their own, ``plugins/<plugin>`` (a plugin.path entry's sub-folders are
    its plugins, each with an isolated class loader), copied as :func:`copy_dependencies` does."""
    into = f"plugins/{plugin}"
    return copy_dependencies(pom, home, into, what=what, stamp=stamp, error=error, settings=settings).parent
