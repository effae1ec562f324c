"""The MCP server (SPEC §16) on the official SDK: MCPServer with the tools of agents/mcp/tools.py,
served over streamable HTTP, stateless, with JSON responses (no SSE, no session: every POST is
answered on its own, so any worker may answer it).

Errors are tool results (`isError: true`) whose text content is the JSON of `{code, message,
details}` with the REST API's codes, and which carry no structured content: a client that checks
a result's structured content against the tool's `outputSchema` (the MCP Inspector does, error
or not) would otherwise report a schema mismatch instead of the error. A domain error
(core.exceptions.VouchError) as it is; arguments that do not match the input schema as
`validation_error` with a message per field (checked before the tool runs, by
`arguments_checked`), or `invalid_amount` for `amount_micro`, as the REST refund says; a tool
that does not exist as `unknown_tool`; anything unexpected as `internal_error` (logged).
`serverInfo` names Vouch and its version (core.version)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestURLParams,
    InputRequiredResult,
    ListToolsResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import ValidationError

from agents import selectors as refund_requests
from agents.mcp import tools
from agents.mcp.threads import in_thread
from agents.oauth.tokens import MCP_PATH
from core.exceptions import InternalError, InvalidInput, VouchError
from core.version import vouch_version

logger = logging.getLogger("vouch.mcp")

CALL_SCOPE_KEY = "vouch.mcp.call"  # where agents/mcp/asgi.py leaves the caller, in the ASGI scope
INSTRUCTIONS = (
    "Vouch holds buyers' money in escrow envelopes. Amounts are integer micro-dollars "
    "(1 USD = 1,000,000 micro; $12.34 = 12340000) in fields ending in _micro, each with a _usd "
    "twin for reading. No tool moves money: envelope_refund_request answers a confirm_url that "
    "the envelope's owner opens in the browser to confirm. Lists are paged with has_more and "
    "next_cursor."
)


def error_result(error: VouchError) -> CallToolResult:
    body = {"code": error.code, "message": error.message, "details": error.details}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], is_error=True)


def _field_errors(exc: ValidationError) -> dict[str, list[str]]:
    """Pydantic's errors as the REST API words them: {field: [message, ...]}."""
    errors: dict[str, list[str]] = {}
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "extra_forbidden":
            message = "Unknown field."
        elif error["type"] == "missing":
            message = "This field is required."
        else:
            message = str(error["msg"])
        errors.setdefault(field, []).append(message)
    return errors


def arguments_refused(spec: tools.ToolSpec, arguments: Any) -> VouchError | None:
    """Why `arguments` do not fit the tool's input schema, as the REST API would say it; None if
    they do."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return InvalidInput(
            "The arguments must be a JSON object.",
            details={"arguments": ["Expected a JSON object."]},
        )
    try:
        spec.input.model_validate(arguments)
    except ValidationError as exc:
        return InvalidInput(details=_field_errors(exc))
    return None


async def arguments_checked(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Server middleware: a tools/call whose arguments do not fit the tool's input schema is
    answered here, as an error result with the REST API's codes (the SDK would answer plain
    text), as is a tool that does not exist. Everything else goes on to the SDK."""
    params = ctx.params
    if ctx.method == "tools/call" and isinstance(params, Mapping):
        name = str(params.get("name"))
        spec = tools.TOOLS.get(name)
        if spec is None:
            return error_result(
                tools.UnknownTool(
                    f"There is no tool named {name!r}: call tools/list for the tools you may call.",
                    details={"tool": name},
                )
            )
        refused = arguments_refused(spec, params.get("arguments"))
        if refused is not None:
            return error_result(refused)
    return await call_next(ctx)


async def tools_listed(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: `tools/list` shows only the tools the caller may call
    (tools.callable_by): a buyer never sees the staff tools, nor a token the tools of scopes it
    was not granted. Calling one anyway is refused as before (agents/mcp/asgi.py)."""
    result = await call_next(ctx)
    if ctx.method != "tools/list" or result is None:
        return result
    # The SDK's inner middleware may have serialized the result already (a dict, by alias).
    listed = (
        result if isinstance(result, ListToolsResult) else ListToolsResult.model_validate(result)
    )
    request = ctx.request
    call = getattr(request, "scope", {}).get(CALL_SCOPE_KEY) if request is not None else None
    allowed = tools.callable_by(call.principal) if isinstance(call, tools.Call) else frozenset()
    return listed.model_copy(update={"tools": [t for t in listed.tools if t.name in allowed]})


def current_call(ctx: Context[Any, Any]) -> tools.Call:
    request = ctx.request_context.request
    call = request.scope.get(CALL_SCOPE_KEY) if request is not None else None
    if not isinstance(call, tools.Call):  # never served without agents/mcp/asgi.py in front
        raise RuntimeError("an MCP tool ran without an authenticated caller")
    return call


def _checked_run(spec: tools.ToolSpec, call: tools.Call, args: Any) -> dict[str, Any] | VouchError:
    try:
        return tools.run(spec, call, args)
    except VouchError as error:
        return error
    except Exception:
        logger.exception("MCP tool %s failed", spec.name)
        return InternalError()


def url_elicitation_declared(ctx: Context[Any, Any]) -> bool:
    """Whether the host said it can show a URL-mode elicitation (`elicitation: {url: {}}`; an
    empty `elicitation: {}` is form mode only). Served stateless, Vouch knows a host's
    capabilities only when each request carries them (protocol 2026-07-28's `_meta`); a host on
    the 2025 handshake is answered the link in the result."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


def _answer_action(answer: Any) -> str | None:
    if answer is None:
        return None
    action = answer.get("action") if isinstance(answer, dict) else getattr(answer, "action", None)
    return str(action)


def confirmation_message(request: dict[str, Any]) -> str:
    """The sentence a host shows the person beside the confirmation page's link."""
    amount = refund_requests.usd_text(int(request["preview"]["total_micro"]))
    return (
        f"Confirm in your browser: refund {amount} from your Vouch envelope "
        f"{request['envelope_id']} to the card that funded it (request {request['request_id']}). "
        "No money moves until you confirm on the page."
    )


# The confirmation page as a URL-mode elicitation, over protocol 2026-07-28's input requests:
# docs/decisions/0015-the-confirmation-page-as-a-url-elicitation.md
async def confirmation_offered(
    ctx: Context[Any, Any], call: tools.Call, request: dict[str, Any]
) -> dict[str, Any] | InputRequiredResult:
    """A pending refund request, to a host that can show URL-mode elicitations: first an input
    request (keyed by the request id) sending the person to the confirmation page; on the host's
    retry with the person's answer, the request (accepted: still pending until the owner confirms
    on the page) or the request refused (declined or cancelled). Other hosts, and requests no
    longer pending, get the result as it is, its `confirm_url` in it."""
    if request.get("status") != refund_requests.PENDING or not url_elicitation_declared(ctx):
        return request
    request_id = str(request["request_id"])
    action = _answer_action((ctx.input_responses or {}).get(request_id))
    if action is None:
        offer = ElicitRequestURLParams(
            message=confirmation_message(request),
            url=str(request["confirm_url"]),
            elicitation_id=request_id,
        )
        return InputRequiredResult(input_requests={request_id: ElicitRequest(params=offer)})
    if action == "accept":  # the person went to the page; their confirmation there moves money
        return request
    return await in_thread(tools.refund_request_decline)(call, request_id)


def _tool(spec: tools.ToolSpec) -> Tool:
    async def run(ctx: Context[Any, Any], **arguments: Any) -> Any:
        args = spec.input.model_construct(**arguments)  # validated by the SDK already
        call = current_call(ctx)
        result = await in_thread(_checked_run)(spec, call, args)
        if isinstance(result, VouchError):
            return error_result(result)
        if spec.confirms_in_browser:
            return await confirmation_offered(ctx, call, result)
        return result

    return Tool(
        fn=run,
        name=spec.name,
        title=spec.title,
        description=spec.description,
        parameters=spec.input.model_json_schema(by_alias=True),
        fn_metadata=FuncMetadata(arg_model=spec.input, output_model=spec.output),
        is_async=True,
        context_kwarg="ctx",
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )


def build_server() -> MCPServer[Any]:
    # Stateless, each request's transport is "terminated" when answered, and the SDK says so at
    # INFO: a log line per MCP request, saying nothing. Its warnings and errors still show.
    logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)
    return MCPServer(
        "vouch",
        title="Vouch",
        version=vouch_version(),
        instructions=INSTRUCTIONS,
        tools=[_tool(spec) for spec in tools.SPECS],
        middleware=[arguments_checked, tools_listed],
        log_level="WARNING",
    )


def transport_security() -> TransportSecuritySettings:
    """The SDK's DNS-rebinding check, from ALLOWED_HOSTS: each host on any port, and browser
    origins on those hosts. A wildcard entry (`*`, `.example.com`) cannot be said in the SDK's
    terms: then only agents/mcp/asgi.py checks the host (with Django's rules), as for any page."""
    hosts = list(settings.ALLOWED_HOSTS)
    if not hosts and settings.DEBUG:
        hosts = ["localhost", "127.0.0.1", "[::1]"]  # what Django allows then
    if any(host == "*" or host.startswith(".") for host in hosts):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed_hosts = [pattern for host in hosts for pattern in (host, f"{host}:*")]
    allowed_origins = [
        f"{scheme}://{pattern}" for scheme in ("http", "https") for pattern in allowed_hosts
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )


def session_manager(server: MCPServer[Any]) -> StreamableHTTPSessionManager:
    """A new session manager (one per server run: the SDK's can run only once)."""
    server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(),
    )
    return server.session_manager


def host_allowed(host: str) -> bool:
    """Django's own rule for the Host header (ALLOWED_HOSTS, wildcards included)."""
    domain, _port = split_domain_port(host)
    hosts = list(settings.ALLOWED_HOSTS)
    if not hosts and settings.DEBUG:
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, hosts)
