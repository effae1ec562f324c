"""Vouch's ASGI entry point: `/mcp` (and `/mcp/`) goes to the MCP server (agents/mcp), the rest
to Django. The lifespan is handled here (Django's handler takes HTTP only): it starts the MCP
SDK's session manager and stops it at shutdown. With DEBUG on, static files are served too (as
`runserver` would), so that the admin is styled under `make run`.

`make run` serves this with uvicorn; production with gunicorn and uvicorn workers
(`gunicorn config.asgi:application -k uvicorn_worker.UvicornWorker`)."""

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

# Sets Django up: the apps' modules are imported after it.
django_application: Any = get_asgi_application()

from django.conf import settings  # noqa: E402
from starlette.types import Receive, Scope, Send  # noqa: E402

from agents.mcp.asgi import McpApplication  # noqa: E402
from agents.oauth.tokens import MCP_PATH  # noqa: E402

if settings.DEBUG:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_application = ASGIStaticFilesHandler(django_application)

mcp_application = McpApplication()
MCP_PATHS = (MCP_PATH, MCP_PATH + "/")


async def lifespan(scope: Scope, receive: Receive, send: Send) -> None:
    """ASGI lifespan: the MCP server runs between startup and shutdown."""
    started = False
    try:
        await receive()  # lifespan.startup
        async with mcp_application.running():
            started = True
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
    except BaseException as exc:
        failed = "lifespan.shutdown.failed" if started else "lifespan.startup.failed"
        await send({"type": failed, "message": repr(exc)})
        raise
    await send({"type": "lifespan.shutdown.complete"})


async def application(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        await lifespan(scope, receive, send)
    elif scope["type"] in ("http", "websocket") and scope["path"] in MCP_PATHS:
        # `/mcp/` is `/mcp` (one resource): a client that adds the slash gets the same answers,
        # the 401 challenge included, rather than a page it cannot read.
        await mcp_application(
            {**scope, "path": MCP_PATH, "raw_path": MCP_PATH.encode()}, receive, send
        )
    else:
        await django_application(scope, receive, send)
