"""``GET /ui`` and ``GET /ui/<file>``: the console's files, read from the installed package.

Why so small: the console is only a REST client that runs in the browser, so everything it shows or does
goes through the routes (and the guards) every other client uses: basic auth in ``rest/server.py``, the
cross-site write checks in ``rest/guards.py``. The files are a fixed list read once from the package
(``importlib.resources``), so no request path reaches the file system. The answers carry a
Content-Security-Policy that allows scripts and styles from this origin only, which keeps a config value
the console displays from ever running as script, and forbids framing (click-jacking of the bulk
actions). ``rest.console.enable=false`` leaves the routes out: ``/ui`` is then a 404 like any unknown path.
"""

from __future__ import annotations

import functools
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from kconnect.runtime.errors import NotFoundError

__all__ = ["CONTENT_SECURITY_POLICY", "FILES", "console_router"]

#: The console's files and their media types; nothing else under /ui is served.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
#: Scripts, styles and calls from this origin only; ``connect-src`` also lets the group picture read other
#: workers' ``/metrics`` (which their own CORS settings still decide).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' http: https:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@functools.cache
def _read(name: str) -> bytes:
    return resources.files("kconnect.rest.ui").joinpath("static", name).read_bytes()


def console_router() -> APIRouter:
    """The routes serving the console's files."""
    router = APIRouter(include_in_schema=False)

    @router.get("/ui")
    async def ui_root() -> Response:
        # Relative links in index.html resolve against /ui/, not /.
        return RedirectResponse("/ui/", status_code=308)

    @router.get("/ui/{name}")
    async def ui_file(name: str) -> Response:
        name = name or "index.html"
        if name not in FILES:
            raise NotFoundError(f"No console file {name!r}")
        return Response(
            _read(name),
            media_type=FILES[name],
            headers={
                "Content-Security-Policy": CONTENT_SECURITY_POLICY,
                "X-Content-Type-Options": "nosniff",
                "Cache-Control": "no-cache",
                "Referrer-Policy": "no-referrer",
            },
        )

    @router.get("/ui/")
    async def ui_index() -> Response:
        return await ui_file("index.html")

    return router
