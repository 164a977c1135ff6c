"""Worker keys for the REST API: listeners, TLS, authentication, the console (rows of
:mod:`kconnect.config.worker_keys`).
"""

from __future__ import annotations

from .key_definition import (
    Definition,
)
from .listeners import ListenerList
from .values import (
    INT32_MAX,
    Choice,
    ConfigType,
    HeaderRules,
    IntRange,
    NonEmptyItems,
)

__all__ = ["REST_KEYS"]

REST_KEYS: tuple[Definition, ...] = (
    # REST API
    Definition(
        "listeners",
        ConfigType.LIST,
        "http://:8083",
        "URLs the REST API listens on. An empty host binds every interface, as Apache Kafka Connect's Jetty"
        " does (its documentation says the default interface), and so does 0.0.0.0.",
        ListenerList(may_be_empty=False),
    ),
    Definition(
        "admin.listeners",
        ConfigType.LIST,
        None,
        "URLs for the admin endpoints (/admin/...). Unset: they are served on listeners; empty: they are "
        "disabled.",
        ListenerList(may_be_empty=True),
        default_text="(served on listeners)",
    ),
    Definition(
        "rest.advertised.host.name",
        ConfigType.STRING,
        None,
        "Host name other workers use to reach this one, if not the listener's.",
    ),
    Definition(
        "rest.advertised.port",
        ConfigType.INT,
        None,
        "Port other workers use to reach this one, if not the listener's.",
        IntRange(1, 65535),
    ),
    Definition(
        "rest.advertised.listener",
        ConfigType.STRING,
        None,
        "Protocol (http or https) of the URL advertised to other workers.",
        Choice(["http", "https"], case_insensitive=True),
    ),
    Definition(
        "rest.extension.classes",
        ConfigType.LIST,
        "",
        "REST extensions to load, in order. They often implement authentication, so a worker must "
        "refuse to start rather than run without one it cannot load.",
        NonEmptyItems(),
    ),
    Definition(
        "access.control.allow.origin",
        ConfigType.STRING,
        "",
        "Value of the Access-Control-Allow-Origin header; empty allows only the REST API's own origin, "
        "'*' allows any. kconnect also refuses (403) a write (POST, PUT, PATCH, DELETE) whose Origin "
        "header names an origin not allowed here, since browsers send simple cross-site writes anyway.",
    ),
    Definition(
        "access.control.allow.methods",
        ConfigType.STRING,
        "",
        "Value of the Access-Control-Allow-Methods header; empty allows GET, POST and HEAD.",
    ),
    Definition(
        "response.http.headers.config",
        ConfigType.STRING,
        "",
        "Rules adding headers to every REST response, e.g. 'set X-Frame-Options:DENY'.",
        HeaderRules(),
    ),
    Definition(
        "rest.allowed.hosts",
        ConfigType.LIST,
        "",
        "Host header values (host or host:port, case-insensitive) the REST API answers; any other gets 403, "
        "which keeps a DNS-rebinding web page from reaching the API through a name it controls. Empty: "
        "any host. GET /health answers whatever the Host, for probes that address a pod by IP.",
        NonEmptyItems(),
        kconnect=True,
    ),
    Definition(
        "rest.request.timeout.ms",
        ConfigType.INT,
        "30000",
        "How long a REST client may take to send a request's headers, and then its body; past it the "
        "connection is closed (headers) or answered 408 (body), so slow clients cannot hold connections "
        "and request slots.",
        IntRange(1, INT32_MAX),
        kconnect=True,
    ),
    Definition(
        "rest.max.concurrent.requests",
        ConfigType.INT,
        "32",
        "REST requests handled at once, GET /health and GET / excepted; more are answered 503 at once. "
        "Below the 40 threads REST handlers share, so reads still find a thread while writes wait on "
        "Kafka, and /health always answers.",
        IntRange(1, INT32_MAX),
        kconnect=True,
    ),
    Definition(
        "rest.console.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether the REST listeners also serve the web console at /ui (static files from the kconnect "
        "package, no external assets). It calls the same REST API from the browser, so it needs no "
        "rights of its own: basic auth and the cross-site write checks apply to it as to any client. "
        "false answers /ui with 404.",
        kconnect=True,
    ),
)
