"""``/connector-plugins``: what plugins this worker has, their config keys, and config validation.

Shapes and status codes are Apache Kafka Connect 3.9's (checked against the reference worker), with
one deliberate difference: where Java answers 500 for a request body that is not a JSON object, names
no connector class or names a plugin it does not have, kconnect answers 400, because these are the
client's mistakes and a 500 would send an operator looking for a server bug.

Validation runs plugin code (``Connector.validate``), so it runs in a thread, never on the event loop.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from kconnect.config.config_providers import worker_config_providers
from kconnect.config.worker import ExactlyOnceSourceSupport
from kconnect.rest.bodies import parse_json
from kconnect.runtime import logs
from kconnect.runtime.errors import BadRequestError, ConnectError, NotFoundError
from kconnect.runtime.plugins.catalog import PluginCatalog, UnknownPluginError
from kconnect.runtime.plugins.config_infos import ConfigInfos
from kconnect.runtime.plugins.connector_config import ConnectorConfigError
from kconnect.runtime.plugins.connector_validation import plugin_mismatch_error, validate_connector_config
from kconnect.runtime.plugins.override_policy import OverridePolicy
from kconnect.runtime.plugins.plugin_calls import PluginCallTimeout
from kconnect.runtime.plugins.plugin_versions import InvalidVersionSpec
from kconnect.runtime.plugins.registry import AmbiguousPluginError, PluginError, PluginVersionError
from kconnect.runtime.shell.worker import Worker

log = logs.get(__name__)


def parse_config_body(raw: bytes) -> dict[str, str | None]:
    """A connector config as the validate endpoint takes it: a JSON object of scalar values.

    Nulls are kept (validation reports them per key, as Java does); numbers and booleans become their
    JSON text, which is what a user who wrote ``"tasks.max": 2`` meant.
    """
    if not raw.strip():
        raise BadRequestError("Request body is empty; a JSON object of connector configs was expected")
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise BadRequestError(
            f"Connector config must be a JSON object of string keys and values, not {type(body).__name__}"
        )
    out: dict[str, str | None] = {}
    for key, value in body.items():
        if isinstance(value, dict | list):
            raise BadRequestError(f"Connector config: value of '{key}' must be a string, number or boolean")
        if value is None:
            out[key] = None
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def connectors_only(value: str | None) -> bool:
    """Java binds the query parameter with ``Boolean.valueOf``: only ``true`` (any case) is true."""
    return True if value is None else value.strip().lower() == "true"


def plugins_router(worker: Worker) -> APIRouter:
    """The ``/connector-plugins`` endpoints, answered from this worker's own registry on every worker
    (no forwarding to the leader), as Java answers them."""
    router = APIRouter()
    catalog = PluginCatalog.of(worker.registry)
    for problem in worker.registry.load_errors:
        # Once per worker start: the plugin is missing from the list, this says why.
        log.warning("connector plugin could not be loaded", problem=problem)

    @router.get("/connector-plugins")
    def list_plugins(connectorsOnly: str | None = None) -> list[dict[str, str]]:
        """Installed plugins: connectors only by default; all kinds with ``connectorsOnly=false``."""
        return catalog.listing(connectors_only(connectorsOnly))

    @router.get("/connector-plugins/errors")
    def plugin_errors() -> list[dict[str, str]]:
        """kconnect's own: plugins that failed to load (import errors, bad entry points), one per entry."""
        return [{"error": problem} for problem in worker.registry.load_errors]

    @router.get("/connector-plugins/{plugin}/config")
    def plugin_config(plugin: str, version: str | None = None) -> list[dict[str, Any]]:
        """The plugin's config keys; for connectors followed by the keys every connector of its type has.
        ``version`` (KIP-891) picks among installed versions: a version, a range or ``latest``."""
        try:
            return [k.to_json() for k in catalog.config_keys(plugin, version)]
        except (UnknownPluginError, PluginVersionError) as exc:
            raise NotFoundError(str(exc)) from exc
        except (AmbiguousPluginError, InvalidVersionSpec) as exc:
            raise BadRequestError(str(exc)) from exc

    @router.put("/connector-plugins/{plugin}/config/validate")
    async def validate(plugin: str, request: Request) -> JSONResponse:
        """Validate a connector config key by key; problems are in the answer, not in the status."""
        config = parse_config_body(await request.body())
        mismatch = plugin_mismatch_error(plugin, config.get("connector.class"))
        if mismatch is not None:
            raise BadRequestError(mismatch)
        eos = worker.config.exactly_once_source_support == ExactlyOnceSourceSupport.ENABLED

        def run() -> ConfigInfos:
            return validate_connector_config(
                worker.registry,
                config,
                worker_group_id=worker.config.group_id,
                exactly_once_source_enabled=eos,
                worker_passthrough=worker.config.passthrough,
                worker_security_protocol=worker.config.security_protocol,
                override_policy=OverridePolicy.of_worker(worker.config),
                config_providers=worker_config_providers(worker.config),
            )

        try:
            # Bounded (connector.method.timeout.ms): a validate() that hangs answers 500 naming the call,
            # and holds one abandoned thread, never one of the handlers' threads.
            infos = await run_in_threadpool(
                worker.plugin_calls.run_bounded,
                f"connector class {config.get('connector.class')}",
                "validate",
                worker.config.connector_method_timeout_ms / 1000,
                run,
            )
        except PluginCallTimeout as exc:
            raise ConnectError(f"{exc} (connector.method.timeout.ms)") from exc
        except (ConnectorConfigError, PluginError) as exc:
            raise BadRequestError(str(exc)) from exc
        return JSONResponse(infos.to_json())

    return router
