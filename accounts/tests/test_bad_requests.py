"""Malformed input is a 400 with a JSON message, never a 500."""

import pytest


@pytest.mark.parametrize(
    "url", ["/api/v1/auth/register", "/api/v1/auth/login", "/api/v1/auth/refresh"]
)
def test_bad_json_to_public_endpoint_gets_400(anon_client, url):
    response = anon_client.post(url, "{not json", content_type="application/json")

    assert response.status_code == 400
    assert "JSON" in response.json()["detail"]


def test_bad_json_creating_project_gets_400(user_client):
    response = user_client.post("/api/v1/projects", "{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"]


def test_json_array_body_gets_400(user_client):
    response = user_client.post("/api/v1/projects", [1, 2], format="json")

    assert response.status_code == 400
    assert response.json()["detail"]


def test_wrong_type_for_project_name_names_field(user_client):
    response = user_client.post("/api/v1/projects", {"name": ["x"], "slug": "x"}, format="json")

    assert response.status_code == 400
    assert "name" in response.json()["errors"]


def test_oversize_first_name_at_registration_names_field(anon_client, password):
    response = anon_client.post(
        "/api/v1/auth/register",
        {"email": "big@example.com", "password": password, "first_name": "x" * 10_000},
        format="json",
    )

    assert response.status_code == 400
    assert "first_name" in response.json()["errors"]


def test_oversize_email_at_login_gets_4xx(anon_client):
    response = anon_client.post(
        "/api/v1/auth/login", {"email": "a" * 10_000 + "@example.com", "password": "x"}, format="json"
    )

    assert response.status_code in (400, 401)


def test_validation_error_has_human_message_naming_field(user_client):
    body = user_client.post("/api/v1/projects", {"slug": "x"}, format="json").json()

    assert "name" in body["detail"]
    assert body["errors"]["name"]


def test_unsupported_media_type_gets_415(user_client):
    response = user_client.post("/api/v1/projects", "name=x", content_type="text/plain")

    assert response.status_code == 415
    assert response.json()["detail"]
