"""The registry that finds connector plugins: installed distributions' ``kconnect.plugins`` entry points
(Java's service-loader manifests) and ``plugin.path`` directories (Java's isolated plugin directories:
loose modules and packages, or distributions installed with ``pip install --target``, one directory per
installed version, KIP-891). Names resolve as Apache Kafka Connect's ``Plugins`` resolves them.

Apart from the plugin API (:mod:`api`) because the API is what plugin authors read; this is how the
worker finds what they wrote.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from kconnect.runtime.plugins.api import (
    Connector,
    ConnectorType,
    SinkConnector,
    SourceConnector,
    connector_type,
)
from kconnect.runtime.plugins.plugin_versions import newest, not_found_message, requirement, version_key

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "kconnect.plugins"

#: kconnect's own plugins a worker loads only when its properties say so: the FileStream connectors read
#: and write any file the worker may, for any REST caller (Apache Kafka Connect has kept them off the
#: default plugin path since 3.2). Their entry points stay declared; ``discover`` skips them unless asked.
FILE_CONNECTORS_MODULE = "kconnect.connectors.file"
FILE_CONNECTORS_DISABLED = (
    "The FileStream connectors are not enabled on this worker: set file.connectors.enable=true in its "
    "worker properties to offer them"
)


class PluginError(LookupError):
    """A connector class name that resolves to no plugin, or to more than one."""


class PluginNotFoundError(PluginError):
    """No plugin has this name; the message lists the available connectors, as Java's does."""

    pass


class PluginVersionError(PluginError):
    """A plugin is installed, but no version of it meets the requirement (``connector.plugin.version`` and the
    like, KIP-891); ``available`` lists the versions there are."""

    def __init__(self, message: str, available: Sequence[str]) -> None:
        super().__init__(message)
        self.available = list(available)


class AmbiguousPluginError(PluginError):
    """An alias several plugins share; ``candidates`` names them so the user can pick a full class name."""

    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.candidates = list(candidates)


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def pruned_plugin_name(simple: str) -> str:
    """A name without its ``Connector`` suffix: the alias Java gives connector plugins."""
    suffix = "Connector"
    return simple[: -len(suffix)] if simple.endswith(suffix) and len(simple) > len(suffix) else simple


def _is_plugin_class(obj: object) -> bool:
    return (
        inspect.isclass(obj)
        and issubclass(obj, SourceConnector | SinkConnector)
        and not inspect.isabstract(obj)
    )


@dataclass(frozen=True)
class PluginDesc:
    """What the registry knows of one connector plugin."""

    cls: type[Connector]
    class_name: str
    type: ConnectorType
    version: str
    location: str

    @property
    def simple_name(self) -> str:
        """The class name without its module, which a config may name the plugin by."""
        return self.cls.__name__

    @property
    def alias(self) -> str:
        """The simple name without ``Connector``, the shortest name a config may use, as in Java."""
        return pruned_plugin_name(self.cls.__name__)

    def info(self) -> dict[str, str]:
        """The entry ``GET /connector-plugins`` lists for this plugin."""
        return {"class": self.class_name, "type": self.type, "version": self.version}

    def __str__(self) -> str:
        return f"{self.class_name} (type={self.type}, version={self.version}, location={self.location})"


@dataclass
class PluginRegistry:
    """Connector plugins by name; resolves names the way Apache Kafka Connect's ``Plugins`` does.

    A name resolves, in order, as a fully qualified class name (or a declared ``class_aliases`` entry,
    such as a Java class name), then as a simple class name or alias (simple name without the
    ``Connector`` suffix). An alias shared by several plugins is an error that lists them, since
    guessing would silently run the wrong connector.
    """

    #: Class name -> version -> plugin: KIP-891 lets one class be installed in several versions.
    _plugins: dict[str, dict[str, PluginDesc]] = field(default_factory=dict)
    #: Problems met while loading plugins; loading goes on past them, as Java's scanning does.
    load_errors: list[str] = field(default_factory=list)
    #: Every name of the plugins installed but left out on purpose (the FileStream connectors of a worker
    #: without ``file.connectors.enable``), so that naming one says why it is missing.
    disabled_names: dict[str, str] = field(default_factory=dict)

    @classmethod
    def discover(
        cls,
        plugin_path: Iterable[str | Path] = (),
        *,
        entry_point_group: str | None = ENTRY_POINT_GROUP,
        file_connectors: bool = False,
    ) -> PluginRegistry:
        """A registry of the installed plugins (entry points) and those in ``plugin_path``: what a worker
        loads at start-up. The FileStream connectors only with ``file_connectors`` (the worker's
        ``file.connectors.enable``): off unless asked, as a worker must not offer them by default."""
        registry = cls()
        if entry_point_group:
            registry.load_entry_points(entry_point_group, file_connectors=file_connectors)
        for directory in plugin_path:
            registry.load_path(directory)
        return registry

    # ---- registration

    def register(
        self, plugin: type[Connector], location: str = "classpath", version: str | None = None
    ) -> PluginDesc:
        """Add one connector class at one version: ``version`` (its distribution's, when it comes from
        one) or else what its ``version()`` says. Another version of a class already known is added
        beside it (KIP-891); a second class of the same name and version is ignored and reported, as
        Java keeps the first."""
        if not _is_plugin_class(plugin):
            raise TypeError(f"{plugin!r} is not a concrete SourceConnector or SinkConnector subclass")
        name = _qualified_name(plugin)
        if version is None:
            try:
                version = str(plugin().version())
            except Exception as exc:  # a plugin's own bug must not take the registry down
                version = "undefined"
                self.load_errors.append(f"{name}: version() failed: {exc!r}")
        versions = self._plugins.setdefault(name, {})
        existing = versions.get(version)
        if existing is not None:
            if existing.cls is not plugin:
                self.load_errors.append(
                    f"{name} {version} from {location} ignored: a different class of that name and "
                    f"version was loaded from {existing.location}"
                )
            return existing
        desc = PluginDesc(plugin, name, connector_type(plugin), version, location)
        versions[version] = desc
        return desc

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP, *, file_connectors: bool = False) -> None:
        """Register the connectors installed packages declare; a broken one is reported and the rest
        still load. Without ``file_connectors`` the FileStream connectors are only remembered by name."""
        for ep in entry_points(group=group):
            if not file_connectors and ep.module == FILE_CONNECTORS_MODULE:
                self._remember_disabled(ep.name, ep.value)
                continue
            try:
                obj = ep.load()
            except Exception as exc:
                self.load_errors.append(f"entry point {ep.name} = {ep.value}: {exc!r}")
                log.warning(
                    "could not load connector plugin entry point %s = %s", ep.name, ep.value, exc_info=True
                )
                continue
            if not _is_plugin_class(obj):
                self.load_errors.append(f"entry point {ep.name} = {ep.value} is not a connector class")
                continue
            # KIP-891 for Python: a plugin's version is its distribution's.
            self.register(obj, f"entry-point:{ep.name}", ep.dist.version if ep.dist is not None else None)

    def _remember_disabled(self, entry_name: str, value: str) -> None:
        """Note every name a config could use for a plugin left out on purpose, without registering it."""
        module, _, qualname = value.partition(":")
        simple = qualname.rsplit(".", 1)[-1] or entry_name
        names = {f"{module}.{qualname}", simple, pruned_plugin_name(simple)}
        java = {"FileStreamSourceConnector", "FileStreamSinkConnector"}
        if simple in java:  # the class_aliases, without importing the module to read them
            names.add(f"org.apache.kafka.connect.file.{simple}")
        for name in names:
            self.disabled_names[name] = FILE_CONNECTORS_DISABLED

    def load_path(self, path: str | Path) -> None:
        """Import the modules and packages in one ``plugin.path`` entry and register their connectors.

        The directory goes onto ``sys.path`` so plugins import under their natural names (which is
        what users then write in ``connector.class``) and packages can use relative imports. Python
        has no class-loader isolation: plugins share the worker's modules, so a plugin module must
        have a name no other module uses.
        """
        directory = Path(path).expanduser().resolve()
        if directory.is_file() and directory.suffix == ".py":
            self._load_modules(directory.parent, [directory.stem])
            return
        if not directory.is_dir():
            self.load_errors.append(f"plugin path {path} is not a directory; ignored")
            return
        if _is_installation(directory):
            self._load_installation(directory)
            return
        names = []
        for child in sorted(directory.iterdir()):
            if child.name.startswith((".", "_")):
                continue
            if child.is_dir() and _is_installation(child):
                self._load_installation(child)
                continue
            if (child.is_file() and child.suffix == ".py") or (
                child.is_dir() and (child / "__init__.py").is_file()
            ):
                names.append(child.stem)
        self._load_modules(directory, names)

    def _load_modules(self, directory: Path, names: list[str]) -> None:
        # Appended, never prepended: a plugin file must not shadow a module the worker itself imports
        # later. A plugin whose name is already taken elsewhere is reported below instead.
        if str(directory) not in sys.path:
            sys.path.append(str(directory))
        for name in names:
            try:
                module = importlib.import_module(name)
            except Exception as exc:
                self.load_errors.append(f"{directory}/{name}: import failed: {exc!r}")
                log.warning("could not import plugin module %s from %s", name, directory, exc_info=True)
                continue
            origin = getattr(module, "__file__", None)
            if origin is None or directory not in Path(origin).resolve().parents:
                taken_by = origin or "a built-in module"
                self.load_errors.append(
                    f"{directory}/{name}: the name {name!r} is already taken by {taken_by}"
                )
                continue
            for mod in self._walk(module):
                for obj in vars(mod).values():
                    # Only classes defined here: a module that imports another plugin must not re-register it.
                    if _is_plugin_class(obj) and obj.__module__ == mod.__name__:
                        self.register(obj, str(directory))

    def _load_installation(self, directory: Path) -> None:
        """Register the connectors of the distributions installed in one directory (``pip install
        --target``), each at its distribution's version, so that several versions of one plugin can sit
        side by side in ``plugin.path`` (KIP-891), each in a directory of its own.

        Python has one module per name in a process, where Java gives each plugin directory a class
        loader: all of a directory's modules are imported while it is on the path; the first directory to
        bring a module name keeps it in ``sys.modules``; a later one (another version) is imported with the
        earlier modules set aside and then set aside itself, so its classes keep the modules they were
        defined with. A plugin loaded that way must import what it needs when its modules load, not later
        inside functions (such an import finds the first version's module).
        """
        from importlib.metadata import distributions

        found = [
            (dist, ep)
            for dist in distributions(path=[str(directory)])
            for ep in dist.entry_points
            if ep.group == ENTRY_POINT_GROUP
        ]
        if not found:
            self.load_errors.append(f"{directory}: no {ENTRY_POINT_GROUP} entry point in its distributions")
            return
        roots = {ep.module.split(".")[0] for _, ep in found}

        def ours(module_name: str) -> bool:
            return module_name.split(".")[0] in roots

        earlier = {name: module for name, module in sys.modules.items() if ours(name)}
        for name in earlier:
            del sys.modules[name]
        sys.path.insert(0, str(directory))
        importlib.invalidate_caches()
        try:
            for dist, ep in found:
                try:
                    obj = ep.load()
                except Exception as exc:
                    self.load_errors.append(f"{directory}: entry point {ep.name} = {ep.value}: {exc!r}")
                    log.warning(
                        "could not load connector plugin %s from %s", ep.value, directory, exc_info=True
                    )
                    continue
                if not _is_plugin_class(obj):
                    self.load_errors.append(f"{directory}: entry point {ep.name} is not a connector class")
                    continue
                self.register(obj, str(directory), dist.version)
            for root in sorted(roots):  # every module now, while the directory is on the path
                module = sys.modules.get(root)
                if module is not None:
                    self._walk(module)
        finally:
            # Off the path again, so its distributions are not taken for installed ones (entry points).
            sys.path.remove(str(directory))
            if earlier:  # another version came first: it keeps the names
                for name in [n for n in sys.modules if ours(n)]:
                    del sys.modules[name]
                sys.modules.update(earlier)

    def _walk(self, module: ModuleType) -> list[ModuleType]:
        modules = [module]
        search = getattr(module, "__path__", None)
        if search is None:
            return modules
        for info in pkgutil.walk_packages(search, prefix=module.__name__ + "."):
            try:
                modules.append(importlib.import_module(info.name))
            except Exception as exc:
                self.load_errors.append(f"{info.name}: import failed: {exc!r}")
        return modules

    # ---- lookup

    def plugins(self) -> list[PluginDesc]:
        """Every connector plugin at every version, sorted by class name (as Java lists them), then by
        version."""
        descs = [d for versions in self._plugins.values() for d in versions.values()]
        return sorted(descs, key=lambda d: (d.class_name, version_key(d.version)))

    def plugin_info(self) -> list[dict[str, str]]:
        """The ``GET /connector-plugins`` entries of every connector plugin."""
        return [d.info() for d in self.plugins()]

    def connector_class(self, name: str, version: str | None = None) -> type[Connector]:
        """The class a name (and ``connector.plugin.version``) resolves to (see ``find``)."""
        return self.find(name, version).cls

    def find(self, name: str, version: str | None = None) -> PluginDesc:
        """The plugin a ``connector.class`` value names, at the newest version ``version`` (a
        ``connector.plugin.version`` value: a version, a range, ``latest`` or None) allows.

        Raises PluginNotFoundError or AmbiguousPluginError with Java's messages, PluginVersionError when
        no installed version meets the requirement, InvalidVersionSpec when it is no version range.
        """
        versions = self._versions_of(name)
        wanted = requirement(version)
        chosen = newest(versions, wanted)
        if chosen is None:
            assert wanted is not None  # some version is installed, so only a requirement can miss
            desc = next(iter(versions.values()))
            available = sorted(versions, key=version_key)
            raise PluginVersionError(not_found_message(desc.class_name, wanted, available), available)
        return versions[chosen]

    def versions(self, name: str) -> list[str]:
        """The installed versions of the plugin a name resolves to, oldest first."""
        return sorted(self._versions_of(name), key=version_key)

    def _versions_of(self, name: str) -> dict[str, PluginDesc]:
        exact = self._plugins.get(name)
        if exact is not None:
            return exact
        declared = [v for v in self._plugins.values() if name in _any(v).cls.class_aliases]
        if not declared:
            declared = [v for v in self._plugins.values() if name in (_any(v).simple_name, _any(v).alias)]
        if len(declared) == 1:
            return declared[0]
        if declared:
            candidates = sorted(_any(v).class_name for v in declared)
            raise AmbiguousPluginError(
                f"More than one connector matches alias {name}. Please use full package and class name "
                f"instead. Classes found: {', '.join(candidates)}",
                candidates,
            )
        available = ", ".join(str(d) for d in self.plugins()) or "(none)"
        if name in self.disabled_names:
            raise PluginNotFoundError(f"{self.disabled_names[name]} ({name}).")
        raise PluginNotFoundError(
            f"Failed to find any class that implements Connector and which name matches {name}, "
            f"available connectors are: {available}"
        )

    def new_connector(self, name: str, version: str | None = None) -> Connector:
        """A fresh instance of the connector a name (and ``connector.plugin.version``) resolves to."""
        return self.connector_class(name, version)()

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.find(name)
        except PluginError:
            return False
        return True


def _any(versions: Mapping[str, PluginDesc]) -> PluginDesc:
    """One version of a class: they share every name the class is known by."""
    return next(iter(versions.values()))


def _is_installation(directory: Path) -> bool:
    """A directory that distributions were installed into (``pip install --target``)."""
    return any(child.suffix == ".dist-info" and child.is_dir() for child in directory.iterdir())
