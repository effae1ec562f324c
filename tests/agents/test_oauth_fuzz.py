"""Fuzzing the authorization server (issue 38, acceptance 2; SPEC §16): /o/register/, /o/token/,
/o/authorize/ (signed in), /o/revoke_token/, the metadata documents and the fields of a client id
metadata document, fed unicode, lone surrogates, malformed URLs (IPv6 brackets, ports at the edges,
odd schemes, userinfo, huge strings) and numbers at the edges. Never a 5xx, never a traceback in
the log, and every 4xx in the endpoint's own shape: RFC 7591 / RFC 6749 JSON errors, the
authorize page's HTML error page.

Bounded and reproducible: derandomized, a fixed number of examples per endpoint (the whole file
runs in well under a minute), and no example database written (database=None). Each example runs
in a savepoint rolled back after it, so one example's rows (or a failed statement) never reach
the next."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.db import transaction
from django.http import HttpResponse
from django.test import Client
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from oauth2_provider.models import Application

from accounts.models import User
from agents.oauth.limits import REGISTRATIONS, TOKEN_FAILURES
from tests.agents.oauth import browser_as, forget_counts
from tests.drivers.https_documents import DocumentServer
from tests.drivers.logs import LogTap

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --- strategies ---------------------------------------------------------------------------------

# Every code point, lone surrogates included (hypothesis leaves out category Cs unless told).
ANY_CHAR = st.characters(exclude_categories=())
# NUL only now and then: hypothesis favours low code points, and a NUL is refused first
# everywhere, which would keep most examples from reaching anything deeper.
NO_NUL_CHAR = st.characters(exclude_categories=(), min_codepoint=1)
TEXT = st.one_of(
    st.text(NO_NUL_CHAR, max_size=40),
    st.sampled_from(
        [
            "\ud800",
            "a\udfffb",
            "\x00",
            "\u202e",
            "١٢٣",
            "\U0001d7d9\U0001d7da",
            "é" * 300,
            "x" * 5000,
        ]
    ),
)
SCHEMES = st.sampled_from(["http", "https", "HTTP", "ftp", "javascript", "data", "", "h\ud800"])
HOSTS = st.one_of(
    st.sampled_from(
        [
            "127.0.0.1",
            "localhost",
            "[::1]",
            "[::1",
            "::1]",
            "[:::1]",
            "[127.0.0.1]",
            "[fe80::1%25eth0]",
            "[v1.x]",
            "[]",
            "ok.example",
            "xn--e1afmkfd.example",
            "пример.example",
            "10.0.0.1",
            "224.0.0.1",
            "[ff0e::1]",
            "[64:ff9b::a00:1]",
            "",
            "h" * 300,
        ]
    ),
    st.text(NO_NUL_CHAR, max_size=12),
)
PORTS = st.sampled_from(
    ["", ":", ":0", ":1", ":80", ":65535", ":65536", ":99999", ":-1", ":abc", ":+80", ":١٢", ":1:2"]
)
USERINFO = st.sampled_from(["", "user@", "user:pw@", "@", "a@b@", "\ud800@"])
URLS = st.one_of(
    st.builds(
        lambda scheme, userinfo, host, port, path, fragment: (
            f"{scheme}://{userinfo}{host}{port}/{path}{fragment}"
        ),
        SCHEMES,
        USERINFO,
        HOSTS,
        PORTS,
        st.text(NO_NUL_CHAR, max_size=20),
        st.sampled_from(["", "#", "#frag", "?q=1", "?\ud800"]),
    ),
    TEXT,
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**63, 2**64, 10**400, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT, URLS)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(ANY_CHAR, max_size=8), inner, max_size=4),
    ),
    max_leaves=12,
)
SCOPES = st.one_of(
    st.sampled_from(["escrow:read", "escrow:read escrow:refund_request ops:read", "", "root"]),
    TEXT,
)
GRANT_TYPES = st.one_of(
    st.sampled_from(
        [
            "authorization_code",
            "refresh_token",
            "password",
            "client_credentials",
            "implicit",
            "urn:ietf:params:oauth:grant-type:device_code",
            "urn:ietf:params:oauth:grant-type:jwt-bearer",
        ]
    ),
    TEXT,
)
VALID_METADATA = {
    "redirect_uris": ["http://127.0.0.1/callback"],
    "token_endpoint_auth_method": "none",
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "client_name": "Fuzzed",
}
METADATA_FIELDS = {
    "redirect_uris": st.one_of(st.lists(URLS, min_size=1, max_size=2), JSON_VALUES),
    "client_name": st.one_of(TEXT, JSON_VALUES),
    "client_uri": st.one_of(URLS, JSON_VALUES),
    "scope": st.one_of(SCOPES, JSON_VALUES),
    "grant_types": st.one_of(st.lists(GRANT_TYPES, max_size=3), JSON_VALUES),
    "response_types": st.one_of(st.lists(st.sampled_from(["code", "token"])), JSON_VALUES),
    "token_endpoint_auth_method": st.one_of(st.sampled_from(["none", "client_secret_basic"]), TEXT),
    "logo_uri": URLS,
    "software_id": NUMBERS,
}
# One or two fields of a registration that is otherwise valid (so that the odd value reaches
# everything after the first check), or anything at all.
METADATA_CHANGES = st.lists(
    st.one_of(*[st.tuples(st.just(name), values) for name, values in METADATA_FIELDS.items()]),
    min_size=1,
    max_size=2,
).map(dict)
METADATA = st.one_of(
    METADATA_CHANGES.map(lambda changes: {**VALID_METADATA, **changes}),
    st.fixed_dictionaries({}, optional=METADATA_FIELDS),
)
PARAM_VALUES = st.one_of(TEXT, URLS, NUMBERS.map(str))


def _form(params: dict[str, str]) -> str:
    """application/x-www-form-urlencoded as a client might write it: a lone surrogate becomes
    the bytes UTF-8 cannot hold (surrogatepass), as a hostile client can send."""

    def encoded(value: str) -> str:
        return quote(value.encode("utf-8", "surrogatepass"), safe="")

    return "&".join(f"{encoded(k)}={encoded(v)}" for k, v in params.items())


def _json(value: Any) -> str:
    return json.dumps(value)  # ensure_ascii: a lone surrogate travels as "\\ud800"


# --- what every answer must be ------------------------------------------------------------------


def _answered(tap: LogTap, send: Callable[[], HttpResponse]) -> HttpResponse:
    """`send`'s answer, in a savepoint rolled back afterwards; never a 5xx, no traceback."""
    tap.clear()
    with transaction.atomic():
        response = send()
        transaction.set_rollback(True)
    assert response.status_code < 500, response.content[:500]
    text = tap.text()
    assert "Traceback" not in text, text[-2000:]
    return response


def _site_wide_refusal(response: HttpResponse, *, head: bool = False) -> bool:
    """core.api.middleware's answer outside /api/, before any view: a NUL in the query string
    (400) or a URL over REQUEST_MAX_URL_BYTES (414), in plain text (its body dropped for HEAD)."""
    if not response["Content-Type"].startswith("text/plain"):
        return False
    if head:
        return response.status_code in (400, 414) and not response.content
    return (response.status_code == 400 and b"must not contain a NUL" in response.content) or (
        response.status_code == 414 and b"The URL is over" in response.content
    )


def _oauth_json_error(response: HttpResponse, codes: set[str]) -> None:
    """RFC 6749 §5.2 / RFC 7591 §3.2.2: a JSON object with an `error` among `codes`."""
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body["error"] in codes, body
    assert isinstance(body.get("error_description", ""), str)


REGISTRATION_ERRORS = {"invalid_client_metadata", "invalid_redirect_uri", "slow_down"}
TOKEN_ERRORS = {
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
    "invalid_target",
    "slow_down",
}


@pytest.fixture(autouse=True)
def _counts_forgotten() -> Iterator[None]:
    forget_counts(REGISTRATIONS)
    forget_counts(TOKEN_FAILURES)
    yield
    forget_counts(REGISTRATIONS)
    forget_counts(TOKEN_FAILURES)


# --- the endpoints ------------------------------------------------------------------------------


# The inputs issue 38 item 5 found, always tried besides what hypothesis draws.
@example(body={**VALID_METADATA, "client_name": "\ud800"})
@example(body={**VALID_METADATA, "client_uri": "https://x.example/\ud800"})
@example(body={**VALID_METADATA, "redirect_uris": ["http://127.0.0.1/\ud800"]})
@example(body={**VALID_METADATA, "redirect_uris": ["http://[::1/cb"]})
@example(body={**VALID_METADATA, "redirect_uris": ["http://[:::1]/cb"]})
@FUZZ
@given(body=st.one_of(METADATA, JSON_VALUES))
def test_registration_never_answers_5xx(log_tap: LogTap, body: Any) -> None:
    """Issue 38 item 5: a lone surrogate or a malformed IPv6 redirect URI answered 500."""
    client = Client(raise_request_exception=False)
    response = _answered(
        log_tap, lambda: client.post("/o/register/", _json(body), content_type="application/json")
    )
    assert response.status_code in (201, 400, 429), response.content[:500]
    if response.status_code == 201:
        assert response.json()["client_id"]
    else:
        _oauth_json_error(response, REGISTRATION_ERRORS)


@FUZZ
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        st.text(ANY_CHAR, max_size=60).map(lambda s: s.encode("utf-8", "surrogatepass")),
    ),
    content_type=st.sampled_from(
        ["application/json", "text/plain", "application/x-www-form-urlencoded", "", "multipart/x"]
    ),
)
def test_registration_of_raw_bodies_never_answers_5xx(
    log_tap: LogTap, raw: bytes | str, content_type: str
) -> None:
    client = Client(raise_request_exception=False)
    response = _answered(
        log_tap, lambda: client.post("/o/register/", raw, content_type=content_type)
    )
    assert response.status_code in (400, 429), response.content[:500]
    _oauth_json_error(response, REGISTRATION_ERRORS)


TOKEN_PARAMS = st.fixed_dictionaries(
    {"grant_type": GRANT_TYPES},
    optional={
        "client_id": PARAM_VALUES,
        "code": PARAM_VALUES,
        "redirect_uri": URLS,
        "code_verifier": PARAM_VALUES,
        "refresh_token": PARAM_VALUES,
        "resource": URLS,
        "scope": SCOPES,
        "device_code": PARAM_VALUES,
        "client_secret": PARAM_VALUES,
    },
)


@example(params={"grant_type": "urn:ietf:params:oauth:grant-type:device_code"})
@example(params={"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": "x"})
@FUZZ
@given(params=TOKEN_PARAMS)
def test_token_requests_never_answer_5xx(
    log_tap: LogTap, app: Application, params: dict[str, str]
) -> None:
    """Issue 38 item 5: grant_type=urn:ietf:params:oauth:grant-type:device_code answered 500."""
    if "client_id" not in params:
        params = {**params, "client_id": app.client_id}
    client = Client(raise_request_exception=False)
    response = _answered(
        log_tap,
        lambda: client.post(
            "/o/token/", _form(params), content_type="application/x-www-form-urlencoded"
        ),
    )
    assert response.status_code in (400, 401, 429), response.content[:500]
    _oauth_json_error(response, TOKEN_ERRORS)


@FUZZ
@given(
    params=st.dictionaries(
        st.sampled_from(["token", "token_type_hint", "client_id", "client_secret"]),
        PARAM_VALUES,
    )
)
def test_revocation_never_answers_5xx(log_tap: LogTap, params: dict[str, str]) -> None:
    client = Client(raise_request_exception=False)
    response = _answered(
        log_tap,
        lambda: client.post(
            "/o/revoke_token/", _form(params), content_type="application/x-www-form-urlencoded"
        ),
    )
    # RFC 7009: 200 for any token (even unknown) of an authenticated client; else an error.
    assert response.status_code in (200, 400, 401), response.content[:500]
    if response.status_code != 200:
        _oauth_json_error(response, TOKEN_ERRORS | {"unsupported_token_type"})


# Client ids that can be looked up without the network: a registered one, text that is not an
# https URL, and https URLs refused before any DNS look-up (malformed, too long, no path).
CLIENT_IDS = st.one_of(
    st.just("REGISTERED"),
    st.text(NO_NUL_CHAR, max_size=40).filter(lambda s: not s.startswith("https://")),
    st.sampled_from(
        [
            "https://[::1/c.json",
            "https://[:::1]/c.json",
            "https://127.0.0.1:99999/c.json",
            "https://127.0.0.1:-1/c.json",
            "https://127.0.0.1:abc/c.json",
            "https://user:pw@127.0.0.1/c.json",
            "https://127.0.0.1/",
            "https://127.0.0.1/c.json#f",
            "https://127.0.0.1/" + "x" * 200,
        ]
    ),
)
AUTHORIZE_PARAMS = st.fixed_dictionaries(
    {"client_id": CLIENT_IDS},
    optional={
        "response_type": st.one_of(st.sampled_from(["code", "token", "code id_token"]), TEXT),
        "redirect_uri": st.one_of(st.just("http://127.0.0.1/callback"), URLS),
        "state": PARAM_VALUES,
        "code_challenge": PARAM_VALUES,
        "code_challenge_method": st.one_of(st.sampled_from(["S256", "plain"]), TEXT),
        "resource": st.one_of(st.just("http://testserver/mcp"), URLS),
        "scope": SCOPES,
        "prompt": st.one_of(st.sampled_from(["none", "consent", "login"]), TEXT),
    },
)


@pytest.fixture
def browser(buyer: User) -> Client:
    """A buyer's signed-in browser, for every example of a test (signing in is the slow part)."""
    signed_in = browser_as(buyer)
    signed_in.raise_request_exception = False
    return signed_in


@example(params={"client_id": "REGISTERED", "redirect_uri": "http://[:::1]/cb"})
@example(params={"client_id": "REGISTERED", "redirect_uri": "http://[::1/cb"})
@FUZZ
@given(params=AUTHORIZE_PARAMS)
def test_authorization_requests_never_answer_5xx(
    log_tap: LogTap, app: Application, browser: Client, params: dict[str, str]
) -> None:
    """Issue 38 item 5: a signed-in person's malformed IPv6 redirect_uri answered 500."""
    if params["client_id"] == "REGISTERED":
        params = {**params, "client_id": app.client_id}
    response = _answered(log_tap, lambda: browser.get(f"/o/authorize/?{_form(params)}"))
    if _site_wide_refusal(response):
        return
    # The consent page, a redirect to the registered URI with the answer, or the error page.
    assert response.status_code in (200, 302, 400), response.content[:500]
    if response.status_code == 302:
        assert response["Location"].startswith("http://127.0.0.1/callback?")
    else:
        assert response["Content-Type"].startswith("text/html")


# One or two fields of an otherwise valid document, or a client_id that is not its URL.
DOCUMENT_FIELDS = st.one_of(
    METADATA_CHANGES, st.fixed_dictionaries({"client_id": st.one_of(URLS, JSON_VALUES)})
)
_paths = itertools.count()


@example(fields={"client_name": "\ud800"})
@example(fields={"redirect_uris": ["http://[:::1]/cb"]})
@settings(FUZZ, max_examples=80)
@given(fields=DOCUMENT_FIELDS)
def test_client_id_documents_never_answer_5xx(
    log_tap: LogTap, document_server: DocumentServer, browser: Client, fields: dict[str, Any]
) -> None:
    """Issue 38 item 5: a client id document with a surrogate name or a malformed IPv6 redirect
    URI answered 500."""
    path = f"/fuzz/{next(_paths)}.json"  # a new URL each time: documents are cached by URL
    url = document_server.url(path)
    document = {
        "client_id": url,
        "redirect_uris": ["http://127.0.0.1/callback"],
        "token_endpoint_auth_method": "none",
        **fields,
    }
    document_server.serve(path, _json(document).encode())
    query = _form(
        {
            "response_type": "code",
            "client_id": url,
            "redirect_uri": "http://127.0.0.1/callback",
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256",
        }
    )
    response = _answered(log_tap, lambda: browser.get(f"/o/authorize/?{query}"))
    assert response.status_code in (200, 302, 400), response.content[:500]
    assert response["Content-Type"].startswith("text/html") or response.status_code == 302


METADATA_PATHS = st.sampled_from(
    [
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ]
)


@FUZZ
@given(
    path=METADATA_PATHS,
    method=st.sampled_from(["get", "head", "post", "put", "delete", "options"]),
    query=st.dictionaries(PARAM_VALUES, PARAM_VALUES, max_size=3),
)
def test_metadata_documents_never_answer_5xx(
    log_tap: LogTap, path: str, method: str, query: dict[str, str]
) -> None:
    client = Client(raise_request_exception=False)
    response = _answered(log_tap, lambda: getattr(client, method)(f"{path}?{_form(query)}"))
    if response.status_code in (400, 414):
        # A NUL in the query or a URL too long, refused before the view: OAuth's JSON error
        # there too (core.api.middleware, OAUTH_JSON_PATHS); HEAD drops the body.
        assert response["Content-Type"].startswith("application/json")
        if method != "head":
            assert response.json()["error"] == "invalid_request"
        return
    assert response.status_code in (200, 405), response.content[:500]
    if method == "get":
        assert response.status_code == 200
        assert response.json()["issuer" if "server" in path else "resource"]
