"""The HTTP face of the sandbox: Stripe's wire format (form-encoded requests, JSON answers,
API-key auth, idempotency keys), the fault injector and rate limiter in front of it, and the
control API beside it."""

from __future__ import annotations

import base64
import email.parser
import email.policy
import fnmatch
import hashlib
import json
import os
import re
import threading
import time
import traceback
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from stripe_sandbox import contract_checks, control, idempotency, object_view, objects, resources
from stripe_sandbox.clock import Clock
from stripe_sandbox.errors import (
    IDEMPOTENCY_KEY_MAX,
    StripeError,
    idempotency_key_length,
    request_log_url,
)
from stripe_sandbox.ids import new_id
from stripe_sandbox.params import decode_form
from stripe_sandbox.persistence import StateFile
from stripe_sandbox.rate_limits import RateLimits, key_mode, rate_limited
from stripe_sandbox.state import IdempotencyRecord, RequestContext, State
from stripe_sandbox.webhooks import Dispatcher

_ID = r"([A-Za-z0-9_]+)"
_ROUTE_TABLE: list[tuple[str, str, resources.Handler]] = [
    ("POST", "/v1/payment_intents", resources.payment_intent_create),
    ("GET", "/v1/payment_intents/search", resources.payment_intent_search),
    ("GET", "/v1/payment_intents/{id}", resources.payment_intent_retrieve),
    ("POST", "/v1/payment_intents/{id}/confirm", resources.payment_intent_confirm),
    ("GET", "/v1/payment_intents", resources.payment_intent_list),
    ("POST", "/v1/payment_intents/{id}/cancel", resources.payment_intent_cancel),
    ("GET", "/v1/balance_transactions", resources.balance_transaction_list),
    ("GET", "/v1/balance_transactions/{id}", resources.balance_transaction_retrieve),
    ("GET", "/v1/charges", resources.charge_list),
    ("GET", "/v1/charges/{id}", resources.charge_retrieve),
    ("POST", "/v1/refunds", resources.refund_create),
    ("GET", "/v1/refunds", resources.refund_list),
    ("GET", "/v1/refunds/{id}", resources.refund_retrieve),
    ("POST", "/v1/refunds/{id}", resources.refund_update),
    ("POST", "/v1/refunds/{id}/cancel", resources.refund_cancel),
    ("GET", "/v1/disputes", resources.dispute_list),
    ("GET", "/v1/disputes/{id}", resources.dispute_retrieve),
    ("POST", "/v1/disputes/{id}", resources.dispute_update),
    ("POST", "/v1/disputes/{id}/close", resources.dispute_close),
    ("GET", "/v1/files", resources.file_list),
    ("GET", "/v1/files/{id}", resources.file_retrieve),
    ("GET", "/v1/events", resources.event_list),
    ("GET", "/v1/events/{id}", resources.event_retrieve),
]
ROUTES: list[tuple[str, re.Pattern[str], str, resources.Handler]] = [
    (method, re.compile(f"^{pattern.replace('{id}', _ID)}$"), pattern, handler)
    for method, pattern, handler in _ROUTE_TABLE
]
# Each route is one of Stripe's operations in the pinned SDK (SPEC §12.1): checked at import.
OPERATIONS = contract_checks.route_operations(
    [(method, pattern) for method, pattern, _ in _ROUTE_TABLE] + [("POST", "/v1/files")]
)


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str]
    drop: bool = False  # close the connection without answering


def _rate_limited() -> StripeError:
    """The injected `rate_limit` fault's 429 (a test's, not the limiter's: rate_limits.py)."""
    return StripeError(
        429, "Too many requests hit the API too quickly.", code="rate_limit", stored=False
    )


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    # Pretty-printed as Stripe answers, but for lists: Python indents in pure Python, which
    # costs a page of a hundred objects ten times what the page itself costs.
    compact = isinstance(payload, dict) and payload.get("object") in ("list", "search_result")
    return Response(
        status,
        json.dumps(payload, indent=None if compact else 2).encode(),
        {"Content-Type": "application/json", **(headers or {})},
    )


def _error(
    exc: StripeError, headers: dict[str, str] | None = None, log_url: str | None = None
) -> Response:
    return _json(exc.status, exc.body(log_url), {**exc.headers, **(headers or {})})


def _replay(record: IdempotencyRecord, key: str, headers: dict[str, str]) -> Response:
    """The answer stored under a key, as Stripe replays it: status and body as first sent."""
    return Response(
        record.status,
        record.body,
        {
            **headers,
            "Content-Type": "application/json",
            "Idempotent-Replayed": "true",
            "Original-Request": record.request_id,
            "Idempotency-Key": key,
        },
    )


def _server_error(headers: dict[str, str], log_url: str, fault: Any = None) -> Response:
    """Stripe's 500 (https://docs.stripe.com/error-low-level#server-errors)."""
    if fault is not None and fault.should_retry is not None:
        headers = {**headers, "Stripe-Should-Retry": "true" if fault.should_retry else "false"}
    return _error(StripeError(500, "An unknown error occurred", type="api_error"), headers, log_url)


class Sandbox:
    """The sandbox without its HTTP server: `handle()` takes a request and gives a response."""

    def __init__(
        self,
        *,
        base_url: str = "http://127.0.0.1:12111",
        seed: int | None = None,
        rate_limits: bool = True,
        live_keys: bool = False,
    ) -> None:
        """`rate_limits`: enforce Stripe's documented limits (rate_limits.py), on by default.
        `live_keys`: also accept `sk_live_`/`rk_live_` keys, whose requests count against the
        live mode's limits (objects stay test objects): for a test of the live figures."""
        self.base_url = base_url
        self.live_keys = live_keys
        self.clock = Clock()
        self.state = State(self.clock, seed)
        self.dispatcher = Dispatcher(self.state)
        self.state.dispatcher = self.dispatcher
        self.limits = RateLimits(enabled=rate_limits)
        self.persistence: StateFile | None = None

    def open_state_file(self, path: str | os.PathLike[str]) -> None:
        """Keep the state in `path` (persistence.py): load it if it exists (StateFileError if it
        cannot be), then save it soon after every change and at close."""
        persistence = StateFile(path, self)
        persistence.load()
        self.persistence = persistence
        self.state.on_change = persistence.changed
        persistence.start()

    def close(self) -> None:
        self.dispatcher.stop()
        if self.persistence is not None:
            self.persistence.close()

    # --- the pipeline ------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Response:
        url = urlsplit(target)
        path = url.path.rstrip("/") or "/"
        if object_view.wanted(method, path):  # a read-only page of one object, by id
            return Response(*object_view.respond(self.state, path, url.query))
        if path.startswith("/_sandbox/") or path == "/_sandbox":
            return self._control(method, path, body)
        request_id = new_id("req", 14)
        common = {
            "Request-Id": request_id,
            "Stripe-Version": headers.get("stripe-version") or objects.API_VERSION,
        }
        api_key = self._api_key(headers)
        if isinstance(api_key, StripeError):
            return _error(api_key, common)  # no account known: no request log to point at
        # Every error from here names the request's entry in the Dashboard's request log.
        log_url = request_log_url(request_id, self.clock.now_int())

        route = self._route(method, path)
        route_name = route[0] if route else f"{method} {path}"
        with self.state.lock:
            requests = self.state.world.requests
            requests[route_name] = requests.get(route_name, 0) + 1
        # Stripe's limits, before anything runs (nothing stored under a key; README).
        object_id = route[2][0] if route and route[2] else None
        refused = self.limits.admit(key_mode(api_key), route[0] if route else None, object_id)
        if refused is not None:
            return _error(rate_limited(refused), common, log_url)
        if route is None:
            return _error(
                StripeError(
                    404,
                    f"Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs.",
                    stored=False,
                ),
                common,
                log_url,
            )
        _, handler, args = route

        key = headers.get("idempotency-key") if method == "POST" else None
        if key is not None and not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX:
            return _error(idempotency_key_length(key), common, log_url)

        fault = self._strike(method, path)
        if fault is not None and fault.kind in {"server_error", "rate_limit", "refuse", "timeout"}:
            return self._fault_response(fault, common, log_url)

        ctx = RequestContext(request_id=request_id, idempotency_key=key, base_url=self.base_url)
        try:
            if path == "/v1/files" and method == "POST":
                fields, uploads = _multipart(headers.get("content-type", ""), body)
                data = contract_checks.upload_form(fields, uploads)
                fingerprint = idempotency.fingerprint(method, path, {"fields": fields, "files": {
                    name: [filename, hashlib.sha256(content).hexdigest()]
                    for name, (filename, content) in uploads.items()
                }})  # fmt: skip
            else:
                raw = url.query if method == "GET" else body.decode("utf-8")
                data = decode_form(raw)
                fingerprint = idempotency.fingerprint(method, path, data)
        except StripeError as exc:
            return _error(exc, common, log_url)
        except UnicodeDecodeError:
            return _error(
                StripeError(400, "The request body is not valid UTF-8.", stored=False),
                common,
                log_url,
            )

        # The parameters the pinned SDK declares for the operation, or Stripe's 400 (SPEC §12.1).
        refusal = contract_checks.request_refusal(OPERATIONS[route_name], data, headers)
        if refusal is not None:
            return _error(refusal, common, log_url)
        if key is not None:
            claimed = idempotency.claim(self.state, api_key, key, fingerprint)
            if isinstance(claimed, StripeError):
                return _error(claimed, common, log_url)
            if claimed is not None:
                return _replay(claimed, key, common)
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.delay_ms / 1000)

        # The endpoint begins executing: what it answers is stored under the key, 500s included
        # (https://docs.stripe.com/api/idempotent_requests), in the same hold of the lock as its
        # effect, so that no state (a state file's included) has the one without the other.
        with self.state.lock:
            if fault is not None and fault.kind == "error_after_begin":
                response, stored = _server_error(common, log_url, fault), True
            else:
                try:
                    if path == "/v1/files" and method == "POST":
                        status, payload = resources.file_create(self.state, ctx, fields, uploads)
                    else:
                        status, payload = handler(self.state, ctx, data, *args)
                    response = _json(status, payload, common)
                    stored = True
                except StripeError as exc:
                    response = _error(exc, common, log_url)
                    stored = exc.stored
                except Exception:  # a sandbox bug: Stripe's 500, not a dropped socket
                    traceback.print_exc()
                    response, stored = _server_error(common, log_url), True
                if fault is not None and fault.kind == "apply_then_error" and stored:
                    response = _server_error(common, log_url, fault)
            if key is not None:
                idempotency.settle(
                    self.state,
                    api_key,
                    key,
                    status=response.status,
                    body=response.body,
                    stored=stored,
                    request_id=request_id,
                )
            if method != "GET":
                self.state.changed()
        contract_checks.record_answer(
            self.state, OPERATIONS[route_name], data, response.status, response.body
        )
        if key is not None:
            response.headers["Idempotency-Key"] = key
        if fault is not None and fault.kind == "apply_then_drop":
            response.drop = True
        return response

    def _api_key(self, headers: dict[str, str]) -> str | StripeError:
        auth = headers.get("authorization", "")
        key = ""
        if auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        elif auth.lower().startswith("basic "):
            try:
                key = base64.b64decode(auth[6:]).decode().split(":", 1)[0]
            except ValueError:
                key = ""
        if not key:
            return StripeError(
                401,
                "You did not provide an API key. You need to provide your API key in the "
                "Authorization header, using Bearer auth "
                "(e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
                stored=False,
            )
        if not key.startswith("sk_test_") and not (
            self.live_keys and key.startswith(("sk_live_", "rk_live_"))
        ):
            shown = key[:8] + "*" * max(0, len(key) - 12) + key[-4:]
            return StripeError(401, f"Invalid API Key provided: {shown}", stored=False)
        return key

    def _route(
        self, method: str, path: str
    ) -> tuple[str, resources.Handler, tuple[str, ...]] | None:
        if method == "POST" and path == "/v1/files":
            return "POST /v1/files", resources.file_create, ()
        for route_method, regex, pattern, handler in ROUTES:
            if route_method == method:
                match = regex.match(path)
                if match:
                    return f"{method} {pattern}", handler, match.groups()
        return None

    def _strike(self, method: str, path: str) -> Any:
        """The first active fault matching the request, counted, or None."""
        with self.state.lock:
            for fault in self.state.world.faults:
                if fault.method not in ("*", method) or not fnmatch.fnmatchcase(path, fault.path):
                    continue
                if fault.times is not None and fault.hits >= fault.times:
                    continue
                if fault.probability < 1 and self.state.random.random() >= fault.probability:
                    continue
                fault.hits += 1
                return fault
        return None

    def _fault_response(self, fault: Any, common: dict[str, str], log_url: str) -> Response:
        """A fault striking before the endpoint begins: nothing runs, nothing is stored."""
        headers = dict(common)
        if fault.should_retry is not None:
            headers["Stripe-Should-Retry"] = "true" if fault.should_retry else "false"
        if fault.kind == "timeout":
            time.sleep(fault.delay_ms / 1000)
            return Response(0, b"", headers, drop=True)
        if fault.kind == "server_error":
            return _server_error(common, log_url, fault)
        if fault.kind == "rate_limit":
            if fault.retry_after_s is not None:
                headers["Retry-After"] = str(fault.retry_after_s)
            return _error(_rate_limited(), headers, log_url)
        code = fault.error_code or "card_declined"
        if code in {
            "card_declined",
            "expired_card",
            "incorrect_cvc",
            "processing_error",
            "incorrect_number",
        }:
            error = StripeError(
                402, "Your card was declined.", type="card_error", code=code, stored=False
            )
        else:
            error = StripeError(
                400, f"Refused by an injected sandbox fault ({code}).", code=code, stored=False
            )
        return _error(error, headers, log_url)

    # --- control and files ---------------------------------------------------------------------

    def _control(self, method: str, path: str, body: bytes) -> Response:
        parts = path.split("/")[2:]
        try:
            payload = json.loads(body or b"{}")
            if not isinstance(payload, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as exc:
            return _json(
                400, {"error": {"type": "sandbox_error", "message": f"Invalid JSON body: {exc}"}}
            )
        try:
            status, result = control.handle(self, method, parts, payload)
        except StripeError as exc:
            return _error(exc)
        if method != "GET":
            with self.state.lock:
                self.state.changed()
        return _json(status, result)

    def file_contents(self, method: str, path: str, headers: dict[str, str]) -> Response | None:
        match = re.match(r"^/v1/files/([A-Za-z0-9_]+)/contents$", path)
        if method != "GET" or not match:
            return None
        api_key = self._api_key(headers)
        if isinstance(api_key, StripeError):
            return _error(api_key)
        with self.state.lock:
            content = self.state.world.file_contents.get(match.group(1))
            file_obj = self.state.world.files.get(match.group(1))
        if content is None or file_obj is None:
            return _error(
                StripeError(404, f"No such file: '{match.group(1)}'", code="resource_missing")
            )
        types = {"pdf": "application/pdf", "png": "image/png", "jpg": "image/jpeg"}
        return Response(
            200, content, {"Content-Type": types.get(file_obj["type"], "application/octet-stream")}
        )


def _multipart(
    content_type: str, body: bytes
) -> tuple[dict[str, str], dict[str, tuple[str, bytes]]]:
    if not content_type.startswith("multipart/form-data"):
        raise StripeError(400, "File uploads must be multipart/form-data.", stored=False)
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields: dict[str, str] = {}
    uploads: dict[str, tuple[str, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        content = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            uploads[name] = (filename, content)
        else:
            fields[name] = content.decode("utf-8")
    return fields, uploads


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        sandbox = self.server.sandbox
        path = urlsplit(self.path).path
        response = sandbox.file_contents(self.command, path, headers) or sandbox.handle(
            self.command, self.path, headers, body
        )
        if response.drop:
            self.close_connection = True
            return
        lines = [f"HTTP/1.1 {response.status} {self.responses.get(response.status, ('',))[0]}"]
        for name, value in {**response.headers, "Content-Length": str(len(response.body))}.items():
            lines.append(f"{name}: {value}")
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)
        self.log_request(response.status, len(response.body))

    do_GET = do_POST = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], sandbox: Sandbox, verbose: bool) -> None:
        super().__init__(address, _Handler)
        self.sandbox = sandbox
        self.verbose = verbose


class SandboxServer:
    """The sandbox on a port: `SandboxServer(port=0).start()` in a test, `python -m stripe_sandbox`
    from a shell."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        webhook_url: str | None = None,
        webhook_secret: str | None = None,
        verbose: bool = False,
        seed: int | None = None,
        state_file: str | os.PathLike[str] | None = None,
        rate_limits: bool = True,
        live_keys: bool = False,
    ) -> None:
        """`state_file`: keep the state there across restarts (persistence.py); a file that cannot
        be loaded raises StateFileError, a port that cannot be had OSError. `rate_limits=False`
        lifts Stripe's limits (on by default); `live_keys` accepts live keys (Sandbox)."""
        if webhook_url and not webhook_secret:
            raise ValueError("a webhook URL needs its signing secret (whsec_...)")
        self.sandbox = Sandbox(seed=seed, rate_limits=rate_limits, live_keys=live_keys)
        try:
            if webhook_url and webhook_secret:
                self.sandbox.dispatcher.add_endpoint(webhook_url, webhook_secret, permanent=True)
            if state_file is not None:
                # After the command line's endpoint: deliveries owed to it resume.
                self.sandbox.open_state_file(state_file)
            self.httpd = _HTTPServer((host, port), self.sandbox, verbose)
        except BaseException:
            self.sandbox.close()
            raise
        address = self.httpd.server_address
        self.host, self.port = str(address[0]), int(address[1])
        self.url = f"http://{self.host}:{self.port}"
        self.sandbox.base_url = self.url
        self._thread: threading.Thread | None = None

    def start(self) -> SandboxServer:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="stripe-sandbox", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.sandbox.close()

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
