import json

import pytest
from rest_framework.test import APIClient

from accounts.models import ApiToken, User
from accounts.services import api_token_issue, api_token_revoke

pytestmark = pytest.mark.django_db


def test_me_by_session(session_client: APIClient) -> None:
    response = session_client.get("/api/v1/me")
    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "data": {
            "username": "alice",
            "is_staff": False,
            "auth_method": "session",
            "email_verified": True,
        },
    }


def test_me_by_bearer_token(bearer_client: APIClient) -> None:
    response = bearer_client.get("/api/v1/me")
    assert response.status_code == 200
    assert response.json()["data"] == {
        "username": "alice",
        "is_staff": False,
        "auth_method": "bearer",
        "email_verified": True,
    }


def test_me_reports_staff(api_client: APIClient, staff: User) -> None:
    api_client.force_login(staff)
    assert api_client.get("/api/v1/me").json()["data"]["is_staff"] is True


def test_me_reports_an_unconfirmed_address(api_client: APIClient) -> None:
    user = User.objects.create_user("unconfirmed", "u@example.com", "pw-unconfirmed-1")
    api_client.force_login(user)
    assert api_client.get("/api/v1/me").json()["data"]["email_verified"] is False


def test_me_after_real_allauth_login_and_logout(buyer: User) -> None:
    client = APIClient()
    response = client.post("/accounts/login/", {"login": "alice", "password": "alice-password-1"})
    assert response.status_code == 302
    assert client.get("/api/v1/me").json()["data"]["auth_method"] == "session"
    client.post("/accounts/logout/")
    assert client.get("/api/v1/me").status_code == 401


@pytest.mark.parametrize("path", ["/api/v1/me", "/api/me"])
def test_anonymous_gets_401_in_the_error_envelope(api_client: APIClient, path: str) -> None:
    response = api_client.get(path)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json() == {
        "success": False,
        "error": {
            "code": "not_authenticated",
            "message": "Log in, or send Authorization: Bearer <token>.",
            "details": {},
        },
    }


@pytest.mark.parametrize(
    "header",
    ["Bearer vch_not-a-real-token", "Bearer", "Bearer two parts", "bearer \u00e9t\u00e9"],
)
def test_bad_bearer_token_gets_401(api_client: APIClient, buyer: User, header: str) -> None:
    response = api_client.get("/api/v1/me", HTTP_AUTHORIZATION=header.encode().decode("latin-1"))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_revoked_token_and_inactive_user_are_refused(buyer: User, staff: User) -> None:
    revoked, revoked_raw = api_token_issue(user=buyer)
    api_token_revoke(token=revoked, actor=staff)
    _, inactive_raw = api_token_issue(user=staff)
    staff.is_active = False
    staff.save()
    for raw in (revoked_raw, inactive_raw):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert client.get("/api/v1/me").status_code == 401


def test_bearer_use_is_recorded(bearer_client: APIClient) -> None:
    assert ApiToken.objects.get().last_used_at is None
    bearer_client.get("/api/v1/me")
    assert ApiToken.objects.get().last_used_at is not None


def test_alias_answers_exactly_as_v1(session_client: APIClient, bearer_client: APIClient) -> None:
    for client in (session_client, bearer_client):
        v1, alias = client.get("/api/v1/me"), client.get("/api/me")
        assert (v1.status_code, v1.content) == (alias.status_code, alias.content)
        assert v1["Content-Type"] == alias["Content-Type"]


@pytest.mark.parametrize(
    "path", ["/api/v1/no-such-route", "/api/no-such-route", "/api/v1/me/extra", "/api/v2/me"]
)
def test_unknown_api_path_gets_json_404(session_client: APIClient, path: str) -> None:
    response = session_client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content)["error"]["code"] == "not_found"


def test_unsafe_session_request_without_csrf_is_refused(session_client: APIClient) -> None:
    response = session_client.post("/api/v1/me", {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "csrf_failed"


def test_unsafe_session_request_with_csrf_reaches_the_view(session_client: APIClient) -> None:
    session_client.get("/api/v1/me")  # sets the csrftoken cookie
    token = session_client.cookies["csrftoken"].value
    response = session_client.post("/api/v1/me", {}, format="json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert response["Allow"] == "GET, HEAD, OPTIONS"


def test_bearer_needs_no_csrf(bearer_client: APIClient) -> None:
    response = bearer_client.delete("/api/v1/me")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
