"""A read-only page of one sandbox object by id (`GET /_sandbox/objects/<id>`): what the admin's
Stripe links open under the sandbox, where the Stripe Dashboard knows none of its objects. Like
the control API it takes no API key (the sandbox listens on 127.0.0.1 only) and is not part of
Stripe. It changes nothing: the object is shown as the API would render it now (a charge with its
refunds), as pretty JSON in a plain HTML page, or as JSON itself with `?format=json`."""

from __future__ import annotations

import html
import json
import re
from typing import Any

from stripe_sandbox.state import State

PREFIX = "/_sandbox/objects/"
_ID = re.compile(r"^[A-Za-z0-9_]{1,255}$")
_LINKABLE = re.compile(r"&quot;([a-z]{2,6}_[A-Za-z0-9]{6,})&quot;")


def wanted(method: str, path: str) -> bool:
    """Whether a request is one for this page (GET only: the page changes nothing)."""
    return method == "GET" and path.startswith(PREFIX)


def _page(title: str, body: str) -> bytes:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:1rem;max-width:70rem}"
        "pre{background:#f6f8fa;padding:1rem;overflow:auto;white-space:pre-wrap;"
        "word-break:break-all}p{color:#555}</style></head><body>"
        f"{body}</body></html>"
    ).encode()


def respond(state: State, path: str, query: str = "") -> tuple[int, bytes, dict[str, str]]:
    """The page of the object `path` names: (status, body, headers); 404 for an id the sandbox
    does not hold."""
    object_id = path.removeprefix(PREFIX).strip("/")
    as_json = "format=json" in query.split("&")
    found: dict[str, Any] | None = None
    if _ID.match(object_id):
        with state.lock:
            obj = state.find(object_id)
            if obj is not None:
                found = state.render(obj)
                if found.get("object") == "charge":
                    found = state.embed_refunds(found)
    if as_json:
        payload: Any = found if found is not None else {"error": f"No such object: {object_id}"}
        return (
            200 if found is not None else 404,
            json.dumps(payload, indent=2).encode(),
            {"Content-Type": "application/json"},
        )
    if found is None:
        body = (
            f"<h1>No such object</h1><p>The Stripe sandbox holds no object "
            f"<code>{html.escape(object_id)}</code> (it may have been reset).</p>"
        )
        return 404, _page("No such object", body), {"Content-Type": "text/html; charset=utf-8"}
    pretty = html.escape(json.dumps(found, indent=2, sort_keys=True))
    # Every other sandbox id in the object opens its own page.
    linked = _LINKABLE.sub(
        lambda m: (
            f'&quot;<a href="{PREFIX}{m.group(1)}">{m.group(1)}</a>&quot;'
            if m.group(1) != object_id
            else m.group(0)
        ),
        pretty,
    )
    kind = str(found.get("object") or "object").replace("_", " ")
    body = (
        f"<h1>{html.escape(kind.capitalize())} <code>{html.escape(object_id)}</code></h1>"
        "<p>As the Stripe sandbox holds it now (read-only; the sandbox's own view, not the "
        f'Stripe Dashboard). <a href="{PREFIX}{html.escape(object_id)}?format=json">JSON</a></p>'
        f"<pre>{linked}</pre>"
    )
    return 200, _page(f"{kind} {object_id}", body), {"Content-Type": "text/html; charset=utf-8"}
