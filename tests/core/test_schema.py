import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _schema() -> dict:
    response = Client().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_schema_lists_each_route_once_at_v1() -> None:
    paths = _schema()["paths"]
    assert "/api/v1/me" in paths
    assert not [path for path in paths if not path.startswith("/api/v1/")]


def test_schema_documents_envelopes_error_codes_and_auth_schemes() -> None:
    schema = _schema()
    me = schema["paths"]["/api/v1/me"]["get"]
    assert {"200", "401"} <= set(me["responses"])  # all: test_schema_conformance.py
    assert "`not_authenticated`" in me["responses"]["401"]["description"]
    assert "`authentication_failed`" in me["responses"]["401"]["description"]
    ok_schema = me["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    envelope = schema["components"]["schemas"][ok_schema.rsplit("/", 1)[1]]
    assert set(envelope["properties"]) == {"success", "data"}
    assert set(schema["components"]["securitySchemes"]) == {"bearerAuth", "cookieAuth"}


def test_interactive_docs_are_served_without_a_cdn() -> None:
    response = Client().get("/api/v1/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    assert "/static/drf_spectacular_sidecar/" in html
    assert "cdn." not in html
