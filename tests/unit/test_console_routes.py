"""The console's routes (rest/ui/routes.py) on the real REST app: its fixed files with their security
headers, nothing else under /ui, basic auth in front of it as in front of the API, and
``rest.console.enable=false`` turning it off."""

from __future__ import annotations

import asyncio
import base64
import re
from importlib import resources
from typing import Any

import httpx
import pytest

from kconnect.config.errors import ConfigError
from kconnect.config.worker import WorkerConfig
from kconnect.rest.app import create_app
from kconnect.rest.server import BasicAuth, wrap_app
from kconnect.rest.ui.routes import CONTENT_SECURITY_POLICY, FILES
from kconnect.runtime.shell.worker import Worker
from tests.support.cluster import worker_properties


def _worker(**extra: str) -> Worker:
    props = worker_properties("127.0.0.1:1", "g", 8083)
    props.update(extra)
    worker = Worker(WorkerConfig.from_properties(props))
    worker.started.set()
    return worker


def _get(app: Any, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://kc:8083") as client:
            return await client.get(path, headers=headers or {})

    return asyncio.run(go())


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_console_file_is_served_from_the_package_with_its_type_and_policy(name: str) -> None:
    resp = _get(create_app(_worker()), f"/ui/{name}")
    assert resp.status_code == 200
    assert resp.headers["content-type"] == FILES[name]
    assert resp.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.content == resources.files("kconnect.rest.ui").joinpath("static", name).read_bytes()


def test_ui_redirects_to_its_index_and_nothing_else_is_served() -> None:
    app = create_app(_worker())
    root = _get(app, "/ui")
    assert (root.status_code, root.headers["location"]) == (308, "/ui/")
    index = _get(app, "/ui/")
    assert index.status_code == 200 and b"console.js" in index.content
    for path in ("/ui/nope.js", "/ui/..%2Fapp.py", "/ui/static/console.js", "/ui/%2e%2e/%2e%2e/etc/passwd"):
        resp = _get(app, path)
        assert resp.status_code == 404, path
        assert resp.json()["error_code"] == 404


def test_the_console_loads_nothing_from_elsewhere() -> None:
    """No CDN, no external font or script: every URL in the files is relative or the API's own."""
    for name in FILES:
        text = resources.files("kconnect.rest.ui").joinpath("static", name).read_text()
        assert not re.search(r"(src|href)=\"(https?:)?//", text), name
        assert not re.search(r"url\((['\"])?(https?:)?//", text), name
        assert "import(" not in text and "@import" not in text, name


def test_rest_console_enable_false_answers_404() -> None:
    app = create_app(_worker(**{"rest.console.enable": "false"}))
    for path in ("/ui", "/ui/", "/ui/console.js"):
        assert _get(app, path).status_code == 404


def test_rest_console_enable_is_validated() -> None:
    props = worker_properties("127.0.0.1:1", "g", 8083)
    props["rest.console.enable"] = "maybe"
    with pytest.raises(
        ConfigError,
        match=r"Invalid value .maybe. for configuration rest\.console\.enable: must be true or false",
    ):
        WorkerConfig.from_properties(props)


def test_basic_auth_guards_the_console_as_it_guards_the_api() -> None:
    worker = _worker()
    auth = BasicAuth({"alice": "s3cret"}, "users.properties")
    app = wrap_app(create_app(worker), "both", worker.config, auth)
    refused = _get(app, "/ui/")
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")
    token = base64.b64encode(b"alice:s3cret").decode()
    assert _get(app, "/ui/", {"Authorization": f"Basic {token}"}).status_code == 200
