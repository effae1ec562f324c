import pytest
from rest_framework.test import APIClient

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.core.urls_errors")]


@pytest.mark.parametrize("path", ["/api/v1/test-failing", "/api/v1/test-plain-failing"])
def test_unexpected_error_is_a_json_500_without_a_trace(path: str) -> None:
    response = APIClient().get(path)
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "success": False,
        "error": {
            "code": "internal_error",
            "message": "Something went wrong on our side; it has been logged.",
            "details": {},
        },
    }
    assert b"sk_test" not in response.content
    assert b"Traceback" not in response.content


def test_validation_error_names_the_field() -> None:
    response = APIClient().post("/api/v1/test-failing", {"amount_micro": -5}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert list(error["details"]) == ["amount_micro"]


@pytest.mark.parametrize("body", [b"{not json", b"", b"[1, 2"])
def test_malformed_json_is_a_400(body: bytes) -> None:
    response = APIClient().post("/api/v1/test-failing", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"malformed_request", "validation_error"}


def test_malformed_json_has_its_own_code() -> None:
    response = APIClient().post(
        "/api/v1/test-failing", b"{not json", content_type="application/json"
    )
    assert response.json()["error"]["code"] == "malformed_request"


def test_wrong_content_type_is_a_415() -> None:
    response = APIClient().post(
        "/api/v1/test-failing", "amount_micro=5", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_domain_error_keeps_its_code_and_status() -> None:
    response = APIClient().put("/api/v1/test-failing", {}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "session_required"


def test_success_envelope() -> None:
    response = APIClient().post("/api/v1/test-failing", {"amount_micro": 7}, format="json")
    assert response.status_code == 201
    assert response.json() == {"success": True, "data": {"amount_micro": 7}}


def test_non_api_pages_keep_html_errors() -> None:
    response = APIClient().get("/no-such-page/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")


def test_every_response_says_how_long_vouch_and_the_provider_took() -> None:
    response = APIClient().post("/api/v1/test-failing", {"amount_micro": 7}, format="json")
    app, provider = response["Server-Timing"].split(", ")
    assert app.startswith("app;dur=")
    assert float(app.split("=")[1]) > 0
    assert provider == "provider;dur=0.00"
