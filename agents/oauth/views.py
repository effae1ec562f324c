"""Vouch's authorization server for the MCP resource (SPEC §16), on django-oauth-toolkit.

- /o/authorize/: log in through allauth (the login redirect carries ?next=), then a Vouch consent
  page listing the client's name and each scope in words; always shown, never skipped. The
  `resource` (RFC 8707) must name this server's MCP resource; a request naming none is bound to
  it all the same. A person asked for more than they hold (a buyer asked for ops:read beside
  escrow:read) is offered the subset they hold, and told what is left out; asked for nothing they
  may grant, they are told so and can only deny.
- /o/token/, /o/revoke_token/: django-oauth-toolkit's, on agents.oauth.server (code + PKCE S256
  and refresh only) and agents.oauth.validators.
- /.well-known/oauth-authorization-server, /.well-known/oauth-protected-resource[/mcp]: the
  discovery documents (agents.oauth.metadata), JSON, no authentication."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST, require_safe
from django.views.generic import View
from oauth2_provider.exceptions import FatalClientError, OAuthToolkitError
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import Application
from oauth2_provider.views import AuthorizationView as DotAuthorizationView
from oauth2_provider.views import RevokeTokenView as DotRevokeTokenView
from oauth2_provider.views import TokenView as DotTokenView
from oauthlib.oauth2.rfc6749 import errors

from accounts.models import User
from agents.models import RegisteredClient
from agents.oauth.client_documents import (
    ClientDocumentRefused,
    client_document_application,
    is_document_client_id,
)
from agents.oauth.limits import (
    TOKEN_FAILURES,
    Caller,
    failure_count,
    failures_wait,
    registration_caller,
    registrations_wait,
    token_caller,
)
from agents.oauth.metadata import authorization_server_metadata, protected_resource_metadata
from agents.oauth.policy import (
    consent_refusal,
    origin_of,
    redirect_uri_refusal,
    redirect_uri_registered,
    resource_refusal,
    scopes_described,
    scopes_grantable,
)
from agents.oauth.registration import (
    ClientMetadata,
    RegistrationRefused,
    client_register_dynamic,
    left_out_described,
    registration_response,
)
from agents.oauth.tokens import mcp_resource_url
from agents.oauth.validators import GRANT_TYPES


def _origin(request: HttpRequest) -> str:
    return origin_of(scheme=request.scheme or "http", host=request.get_host())


def _mcp_resource(request: HttpRequest) -> str:
    return mcp_resource_url(scheme=request.scheme or "http", host=request.get_host())


def _person(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User):  # LoginRequiredMixin lets only a person in
        raise PermissionDenied
    return user


def _redirected(error: errors.OAuth2Error, redirect_uri: str) -> OAuthToolkitError:
    """An error the client hears about at its (already checked) redirect URI."""
    return OAuthToolkitError(error=error, redirect_uri=redirect_uri)


class AuthorizationView(DotAuthorizationView):
    template_name = "oauth2_provider/authorize.html"
    form_class = AllowForm

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        client_id = request.GET.get("client_id", "")
        if settings.MCP_CLIENT_ID_DOCUMENTS and is_document_client_id(client_id):
            try:
                client_document_application(client_id)
            except ClientDocumentRefused as refused:
                return self.error_response(
                    FatalClientError(error=errors.InvalidClientIdError(description=str(refused))),
                    application=None,
                )
        try:
            # client_id and redirect_uri first (a bad one is shown here, never redirected to),
            # then response_type, PKCE S256 and the scopes, answered at the redirect URI.
            scopes, credentials = self.validate_authorization_request(request)
        except OAuthToolkitError as error:
            return self.error_response(error, application=None)
        application = Application.objects.get(client_id=credentials["client_id"])
        redirect_uri, state = credentials["redirect_uri"], credentials.get("state")
        resource = _mcp_resource(request)
        try:
            refusal = resource_refusal(requested=request.GET.getlist("resource"), expected=resource)
            if refusal is not None:
                raise _redirected(
                    errors.CustomOAuth2Error("invalid_target", description=refusal, state=state),
                    redirect_uri,
                )
            if "none" in request.GET.get("prompt", "").split():
                # Consent is always asked for, so a request that forbids asking cannot succeed.
                raise _redirected(errors.ConsentRequired(state=state), redirect_uri)
        except OAuthToolkitError as error:
            return self.error_response(error, application)
        user = _person(request)
        # What the person may grant of what was asked: only that is offered (and posted back).
        granted, withheld = scopes_grantable(user=user, scopes=scopes)
        self.oauth2_data = {
            "scopes": granted or scopes,
            "client_id": credentials["client_id"],
            "redirect_uri": redirect_uri,
            "response_type": credentials["response_type"],
            "state": state,
            "code_challenge": credentials.get("code_challenge"),
            "code_challenge_method": credentials.get("code_challenge_method"),
            "resource": resource,
        }
        registration = RegisteredClient.objects.filter(application=application).first()
        return self.render_to_response(
            self.get_context_data(
                form=self.get_form(),
                application=application,
                registration=registration,
                left_out=left_out_described(registration.metadata.get("left_out"))
                if registration is not None
                else [],
                scopes_described=scopes_described(granted),
                withheld=withheld if granted else [],
                resource=resource,
                redirect_uri=redirect_uri,
                refusal=None if granted else consent_refusal(user=user, scopes=scopes),
                proposes_refunds="escrow:refund_request" in granted,
            )
        )

    def form_valid(self, form: AllowForm) -> HttpResponse:
        """The person's answer. The hidden fields came back through the browser, so what the
        client may not have is checked again before django-oauth-toolkit (and oauthlib, which
        validates the client, redirect URI, PKCE and scopes once more) issues a code."""
        data = form.cleaned_data
        nul = _nul_in(self.request)
        if nul is not None:
            return self.error_response(
                FatalClientError(
                    error=errors.InvalidRequestFatalError(
                        description=f"{nul} must not contain a NUL character."
                    )
                ),
                application=None,
            )
        application = Application.objects.filter(client_id=data["client_id"]).first()
        redirect_uri = data["redirect_uri"]
        if (
            application is None
            or redirect_uri_refusal(redirect_uri) is not None
            or not redirect_uri_registered(redirect_uri, application.redirect_uris.split())
        ):
            # Never redirect to a URI the client did not register (not even to say "denied").
            return self.error_response(
                FatalClientError(
                    error=errors.InvalidRequestFatalError(
                        description="Unknown client or redirect URI."
                    )
                ),
                application=None,
            )
        state = data.get("state") or None
        resource = _mcp_resource(self.request)
        refusal = resource_refusal(
            requested=(data.get("resource") or "").split(), expected=resource
        )
        if refusal is not None:
            return self.error_response(
                _redirected(
                    errors.CustomOAuth2Error("invalid_target", description=refusal, state=state),
                    redirect_uri,
                ),
                application,
            )
        # Every token is bound to the MCP resource, named or not (RFC 8707).
        data["resource"] = resource
        user = _person(self.request)
        if data.get("allow"):
            refusal = consent_refusal(user=user, scopes=data["scope"].split())
            if refusal is not None:
                return self.error_response(
                    _redirected(
                        errors.AccessDeniedError(description=refusal, state=state), redirect_uri
                    ),
                    application,
                )
        return super().form_valid(form)

    def form_invalid(self, form: AllowForm) -> HttpResponse:
        return self.error_response(
            FatalClientError(
                error=errors.InvalidRequestFatalError(
                    description="The consent form came back incomplete."
                )
            ),
            application=None,
        )


def _nul_in(request: HttpRequest) -> str | None:
    """The first parameter (query or form) holding a NUL character, which no stored value can
    hold: such a request is refused before anything is looked up."""
    for data in (request.GET, request.POST):
        for name, values in data.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                return name.replace("\x00", "\\0")
    return None


def _oauth_error(status: int, error: str, description: str, **headers: str) -> JsonResponse:
    """An error of the token and revocation endpoints (RFC 6749 §5.2), never cached."""
    response = JsonResponse({"error": error, "error_description": description}, status=status)
    response["Cache-Control"] = "no-store"
    for name, value in headers.items():
        response[name] = value
    return response


def _form_refusal(request: HttpRequest) -> JsonResponse | None:
    """invalid_request for a form that cannot be read (over DATA_UPLOAD_MAX_MEMORY_SIZE bytes or
    DATA_UPLOAD_MAX_NUMBER_FIELDS fields: Django's own answer is an HTML page) or a parameter
    holding a NUL; None when the form may go on to django-oauth-toolkit."""
    try:
        nul = _nul_in(request)
    except (RequestDataTooBig, TooManyFieldsSent):
        return _oauth_error(
            400,
            "invalid_request",
            f"The request is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes or "
            f"{settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields.",
        )
    if nul is None:
        return None
    return _oauth_error(400, "invalid_request", f"{nul} must not contain a NUL character.")


class TokenView(DotTokenView):
    """django-oauth-toolkit's token endpoint. Every answer is JSON (RFC 6749 §5.1, §5.2): an error
    raised while the token is being saved (invalid_target, RFC 8707) comes back from it without
    a Content-Type, which is set here. A parameter holding a NUL, or a form too big to read, is
    invalid_request, and so is a grant other than the two served (unsupported_grant_type), each
    counted as a failure of its address, client id and credential; a failure once one of them is
    past its limit, or a credential that failed its own, is 429 `slow_down`
    (agents/oauth/limits.py)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # Counted per address, client id and credential (agents/oauth/limits.py).
        caller = token_caller(request)
        wait = failures_wait(scope=TOKEN_FAILURES, caller=caller)
        if wait is not None:
            return _token_slow_down(wait)
        refusal = _form_refusal(request)
        if refusal is not None:
            return _token_failed(caller, refusal)
        grant_type = request.POST.get("grant_type")
        if grant_type is not None and grant_type not in GRANT_TYPES:
            # Before django-oauth-toolkit, whose view sends the device_code grant to its own
            # device flow (a 500 here, where no device grant is served) without asking oauthlib.
            return _token_failed(
                caller,
                _oauth_error(
                    400,
                    "unsupported_grant_type",
                    f"Vouch serves the {' and '.join(GRANT_TYPES)} grants only.",
                ),
            )
        response: HttpResponse = super().post(request, *args, **kwargs)
        response["Content-Type"] = "application/json"
        response["Cache-Control"] = "no-store"
        if response.status_code >= 400:
            return _token_failed(caller, response)
        return response


def _token_failed(caller: Caller, refusal: HttpResponse) -> HttpResponse:
    """Count a failed token request; the refusal, or 429 once one of the caller's identities is
    over its limit (a valid credential never comes here: docs/decisions/0016-limits-by-identity.md
    says why another identity's failures never refuse it)."""
    wait = failure_count(scope=TOKEN_FAILURES, caller=caller)
    return refusal if wait is None else _token_slow_down(wait)


def _token_slow_down(wait: int) -> JsonResponse:
    return _oauth_error(
        429,
        "slow_down",
        f"Too many failed token requests from this client: try again in {wait} s.",
        **{"Retry-After": str(wait)},
    )


class RevokeTokenView(DotRevokeTokenView):
    """django-oauth-toolkit's revocation endpoint (RFC 7009), a NUL or an unreadable form
    refused first."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refusal = _form_refusal(request)
        if refusal is not None:
            return refusal
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response


# No CSRF check on documents nobody can change: any other method is simply 405.
@method_decorator([csrf_exempt, require_safe], name="dispatch")
class AuthorizationServerMetadataView(View):
    """RFC 8414: GET /.well-known/oauth-authorization-server. The issuer is the origin the
    request came to."""

    def get(self, request: HttpRequest) -> JsonResponse:
        return _public_json(authorization_server_metadata(origin=_origin(request)))


@method_decorator([csrf_exempt, require_safe], name="dispatch")
class ProtectedResourceMetadataView(View):
    """RFC 9728: GET /.well-known/oauth-protected-resource/mcp (where an MCP client looks first)
    and /.well-known/oauth-protected-resource (its fallback), the same document."""

    def get(self, request: HttpRequest) -> JsonResponse:
        return _public_json(
            protected_resource_metadata(resource=_mcp_resource(request), origin=_origin(request))
        )


def _public_json(document: dict[str, Any]) -> JsonResponse:
    response = JsonResponse(document)
    # Read by browser-based MCP clients on other origins; it holds nothing private.
    response["Access-Control-Allow-Origin"] = "*"
    return response


@method_decorator([csrf_exempt, require_POST], name="dispatch")
class RegistrationView(View):
    """RFC 7591: POST /o/register/, a public client registering itself (agents.oauth.registration):
    201 with its client information, or 400 invalid_client_metadata / invalid_redirect_uri (a body
    that is not application/json, or over DATA_UPLOAD_MAX_MEMORY_SIZE, is invalid_client_metadata);
    limited per client and address (MCP_REGISTRATION_RATE, 429 slow_down); 404 when
    MCP_DYNAMIC_REGISTRATION is off."""

    def post(self, request: HttpRequest) -> HttpResponse:
        if not settings.MCP_DYNAMIC_REGISTRATION:
            raise Http404
        caller = registration_caller(request)  # the client's address (core/client_address.py)
        address = caller.address
        wait = registrations_wait(caller=caller)
        if wait is not None:
            return _oauth_error(
                429,
                "slow_down",
                f"Too many registrations from this client: try again in {wait} s.",
                **{"Retry-After": str(wait)},
            )
        if request.content_type != "application/json":
            return _oauth_error(
                400,
                "invalid_client_metadata",
                "Send the client metadata as a JSON object, Content-Type application/json "
                "(RFC 7591 §3.1).",
            )
        try:
            body = json.loads(request.body or b"null")
        except RequestDataTooBig:
            # RFC 7591 §3.2.2 answers every refused registration 400 in its own shape (a client
            # reads the error there), rather than Django's HTML page for an oversized body.
            return _oauth_error(
                400,
                "invalid_client_metadata",
                f"The client metadata is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
            )
        except (ValueError, RecursionError):
            body = None
        try:
            metadata = ClientMetadata.checked(body)
        except RegistrationRefused as refused:
            return _oauth_error(400, refused.error, refused.description)
        registration = client_register_dynamic(metadata=metadata, address=address)
        response = JsonResponse(registration_response(registration), status=201)
        response["Cache-Control"] = "no-store"
        return response
