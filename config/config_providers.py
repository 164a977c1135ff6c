"""Config providers for connector configs: ``${provider:[path:]key}`` references resolved where connectors
and tasks start, never where configs are stored or shown.

Why: a secret written into a connector config would otherwise sit in clear in the config topic, in
``GET /connectors/{name}/config`` and ``.../tasks`` and in logs. Apache Kafka Connect's answer is the
worker's ``config.providers``: a connector config holds a reference, the config topic holds the
reference, and only the plugin that starts gets the value. This module is that machinery, pure (files
and the environment are read only when asked), so tables can test it:

- the variable grammar of Kafka's ``ConfigTransformer`` (:mod:`kconnect.config.references`, which the
  worker's properties file shares), re-exported here;
- Kafka's three providers by their Java class names, with KIP-993's ``allowed.paths`` for the file and
  directory ones and ``allowlist.pattern`` for the environment one;
- :func:`reverse_transform`, which puts the references back into task configs a connector computed from
  the resolved values, as Java's herder does before writing them.

One difference from Java, on purpose: Java leaves a reference it cannot resolve (a path outside
``allowed.paths``, a missing key) in place and the plugin gets the literal text. Here such a reference
to a *declared* provider is a problem reported on its key (validation refuses the config; a start fails
naming the key and the reason), since a password that is literally ``${file:...}`` fails later and far
less clearly. References to providers the worker does not declare are left alone, as in Java: the text
may be meant for the plugin.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .classes import CONFIG_PROVIDERS
from .errors import ConfigError
from .properties import load_properties
from .references import VARIABLE, Reference, has_references, references

if TYPE_CHECKING:
    from .worker import WorkerConfig

__all__ = [
    "ALLOWED_PATHS_PARAM",
    "ALLOWLIST_PATTERN_PARAM",
    "VARIABLE",
    "AllowedPaths",
    "ConfigProvider",
    "ConfigProviderError",
    "ConfigProviders",
    "DirectoryConfigProvider",
    "EnvVarConfigProvider",
    "FileConfigProvider",
    "Reference",
    "Resolution",
    "has_references",
    "references",
    "reverse_transform",
    "worker_config_providers",
]

ALLOWED_PATHS_PARAM = "allowed.paths"
ALLOWLIST_PATTERN_PARAM = "allowlist.pattern"


class ConfigProviderError(Exception):
    """A provider could not answer for a reference; the message says why, never what a secret is."""


class AllowedPaths:
    """KIP-993's ``allowed.paths``: absolute, existing roots a file or directory provider may read under.

    As in Kafka, a path is compared after normalisation (``..`` removed) and component-wise (``/a/bc`` is
    not under ``/a/b``), a relative path is under no root, and unset means anywhere. Stricter than Kafka:
    symbolic links are resolved on both sides first, so a link inside a root cannot lead outside it.
    """

    def __init__(self, roots: Sequence[Path] | None) -> None:
        self.roots = None if roots is None else tuple(roots)

    @classmethod
    def parse(cls, text: str | None) -> AllowedPaths:
        """``allowed.paths``'s value; ConfigProviderError names a root that is not absolute or not there."""
        if not text:
            return cls(None)
        roots = []
        for item in text.split(","):
            root = Path(os.path.normpath(item.strip())) if item.strip() else Path(item)
            if not root.is_absolute() or not root.exists():
                raise ConfigProviderError(f"Path {item} is not valid. The path should be absolute and exist")
            roots.append(Path(os.path.realpath(root)))
        return cls(roots)

    def allowed(self, path: str) -> bool:
        """Whether ``path`` lies under a root (always, with no roots configured)."""
        if self.roots is None:
            return True
        if not os.path.isabs(path):
            return False
        real = Path(os.path.realpath(os.path.normpath(path)))
        return any(real == root or root in real.parents for root in self.roots)

    def describe(self) -> str:
        """The roots, for a refusal's message."""
        return "anywhere" if self.roots is None else ", ".join(str(r) for r in self.roots)

    def check(self, path: str) -> None:
        """Raise ConfigProviderError naming the path and the roots when ``path`` is not allowed."""
        if not self.allowed(path):
            raise ConfigProviderError(
                f"the path {path} is not allowed: it must lie under {ALLOWED_PATHS_PARAM} ({self.describe()})"
            )


class ConfigProvider(Protocol):
    """Kafka's ConfigProvider.get(path, keys): the values of those ``keys`` it has at ``path``; a key it
    does not have is simply absent from the answer."""

    def get(self, path: str | None, keys: set[str]) -> dict[str, str]: ...


@dataclass(frozen=True)
class FileConfigProvider:
    """``org.apache.kafka.common.config.provider.FileConfigProvider``: the path is a properties file."""

    allowed_paths: AllowedPaths = field(default_factory=lambda: AllowedPaths(None))

    def get(self, path: str | None, keys: set[str]) -> dict[str, str]:
        if not path:
            return {}
        self.allowed_paths.check(path)
        try:
            data = load_properties(path)
        except OSError as exc:
            raise ConfigProviderError(
                f"could not read properties from file {path}: {exc.strerror or exc}"
            ) from None
        except ValueError as exc:
            raise ConfigProviderError(f"{path} is not a valid properties file: {exc}") from None
        return {k: v for k, v in data.items() if k in keys}


@dataclass(frozen=True)
class DirectoryConfigProvider:
    """``org.apache.kafka.common.config.provider.DirectoryConfigProvider``: the path is a directory, each key
    the name of a regular file directly in it (a mounted Kubernetes secret), its value the file's text."""

    allowed_paths: AllowedPaths = field(default_factory=lambda: AllowedPaths(None))

    def get(self, path: str | None, keys: set[str]) -> dict[str, str]:
        if not path:
            return {}
        self.allowed_paths.check(path)
        directory = Path(path)
        if not directory.is_dir():
            raise ConfigProviderError(f"the path {path} is not a directory")
        found: dict[str, str] = {}
        try:
            for child in directory.iterdir():
                if child.name in keys and child.is_file():
                    found[child.name] = child.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigProviderError(f"could not read directory {path}: {exc.strerror or exc}") from None
        return found


@dataclass(frozen=True)
class EnvVarConfigProvider:
    """``org.apache.kafka.common.config.provider.EnvVarConfigProvider``: environment variables whose names
    ``allowlist.pattern`` finds (Java's ``Pattern.asPredicate``: a match anywhere in the name; default:
    any)."""

    environ: Mapping[str, str]
    allowlist: re.Pattern[str] | None = None

    def get(self, path: str | None, keys: set[str]) -> dict[str, str]:
        if path:
            raise ConfigProviderError(
                f"Path is not supported for EnvVarConfigProvider, invalid value '{path}'"
            )
        return {
            k: v
            for k, v in self.environ.items()
            if k in keys and (self.allowlist is None or self.allowlist.search(k) is not None)
        }


@dataclass(frozen=True)
class Resolution:
    """A config with its references resolved, and what could not be: key -> messages."""

    values: dict[str, str]
    problems: dict[str, list[str]]

    def first_problem(self) -> str | None:
        """One line naming a key and why its reference failed, for a start that must fail."""
        for key, messages in self.problems.items():
            return f"{key}: {messages[0]}"
        return None


@dataclass(frozen=True)
class ConfigProviders:
    """The worker's declared providers by name (``config.providers``)."""

    providers: Mapping[str, ConfigProvider] = field(default_factory=dict)
    #: Declared names whose class kconnect does not implement: their references are left alone.
    unsupported: tuple[str, ...] = ()

    @classmethod
    def of_worker(
        cls, names: Sequence[str], settings: Mapping[str, str], environ: Mapping[str, str]
    ) -> ConfigProviders:
        """Build the providers ``config.providers`` names; ``settings`` are the ``config.providers.*`` keys
        without that prefix (``<name>.class``, ``<name>.param.<param>``). A bad parameter raises
        ConfigError naming its key (the worker must not start, as Java's would not)."""
        providers: dict[str, ConfigProvider] = {}
        unsupported = []
        for name in names:
            class_name = settings.get(f"{name}.class", "").strip()
            kind = CONFIG_PROVIDERS.get(class_name)
            params = {
                k[len(f"{name}.param.") :]: v for k, v in settings.items() if k.startswith(f"{name}.param.")
            }
            if kind is None:
                unsupported.append(name)
                continue
            if kind == "env":
                pattern_text = params.get(ALLOWLIST_PATTERN_PARAM)
                try:
                    pattern = None if pattern_text is None else re.compile(pattern_text)
                except re.error as exc:
                    key = f"config.providers.{name}.param.{ALLOWLIST_PATTERN_PARAM}"
                    raise ConfigError(
                        key, pattern_text or "", f"a valid regular expression ({exc})"
                    ) from None
                providers[name] = EnvVarConfigProvider(dict(environ), pattern)
                continue
            try:
                allowed = AllowedPaths.parse(params.get(ALLOWED_PATHS_PARAM))
            except ConfigProviderError as exc:
                key = f"config.providers.{name}.param.{ALLOWED_PATHS_PARAM}"
                raise ConfigError(
                    key, params.get(ALLOWED_PATHS_PARAM, ""), f"comma-separated absolute paths ({exc})"
                ) from None
            providers[name] = (
                FileConfigProvider(allowed) if kind == "file" else DirectoryConfigProvider(allowed)
            )
        return cls(providers, tuple(unsupported))

    def resolve(self, config: Mapping[str, str | None]) -> Resolution:
        """Resolve every reference to a declared provider in one pass (resolved text is not scanned
        again), asking each provider once per path, as Kafka's ConfigTransformer does."""
        wanted: dict[tuple[str, str | None], set[str]] = {}
        for value in config.values():
            for ref in references(value or ""):
                if ref.provider in self.providers:
                    wanted.setdefault((ref.provider, ref.path), set()).add(ref.key)
        answers: dict[tuple[str, str | None], dict[str, str] | ConfigProviderError] = {}
        for (name, path), keys in wanted.items():
            try:
                answers[(name, path)] = self.providers[name].get(path, keys)
            except ConfigProviderError as exc:
                answers[(name, path)] = exc
        values: dict[str, str] = {}
        problems: dict[str, list[str]] = {}

        def substitute(key: str, match: re.Match[str]) -> str:
            if match["provider"] not in self.providers:
                return match.group(0)
            answer = answers[(match["provider"], match["path"])]
            if isinstance(answer, ConfigProviderError):
                problems.setdefault(key, []).append(f"{match.group(0)} cannot be resolved: {answer}")
                return match.group(0)
            if match["key"] not in answer:
                where = f" at {match['path']}" if match["path"] else ""
                problems.setdefault(key, []).append(
                    f"{match.group(0)} cannot be resolved: provider {match['provider']} has no key "
                    f"{match['key']}{where}"
                )
                return match.group(0)
            return answer[match["key"]]

        for key, value in config.items():
            if value is None:
                continue
            values[key] = VARIABLE.sub(lambda m, k=key: substitute(k, m), value)  # type: ignore[misc]
        return Resolution(values, problems)


def reverse_transform(
    raw: Mapping[str, str | None], resolved: Mapping[str, str], task_configs: Sequence[Mapping[str, str]]
) -> list[dict[str, str]]:
    """Task configs as they may be stored: references put back for resolved values.

    As Java's herder does, a task key that the connector config also has, with a reference there, gets
    the connector's raw value back. Beyond Java, a task value equal to a value some reference resolved to
    (a connector that renamed the key) gets that key's raw value too, so a secret is not written to the
    config topic in clear under another name.
    """
    with_refs = {k: v for k, v in raw.items() if v is not None and has_references(v)}
    secrets = {resolved[k]: v for k, v in with_refs.items() if k in resolved and resolved[k] != v}
    out = []
    for config in task_configs:
        fixed = dict(config)
        for key, value in config.items():
            if key in with_refs:
                fixed[key] = with_refs[key]
            elif value in secrets:
                fixed[key] = secrets[value]
        out.append(fixed)
    return out


def worker_config_providers(
    config: WorkerConfig, environ: Mapping[str, str] | None = None
) -> ConfigProviders:
    """The providers a worker's properties declare, for its connector configs (environment: the process's)."""
    return ConfigProviders.of_worker(
        config.config_providers,
        config.prefixed("config.providers."),
        os.environ if environ is None else environ,
    )
