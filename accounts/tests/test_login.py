import pytest

URL = "/api/v1/auth/login"


def test_login_returns_token_pair(anon_client, user, password):
    response = anon_client.post(URL, {"email": user.email, "password": password}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"access_token", "refresh_token", "token_type"}
    assert body["token_type"] == "bearer"
    assert body["access_token"] and body["refresh_token"]


def test_login_email_is_case_insensitive(anon_client, user, password):
    response = anon_client.post(URL, {"email": "ALICE@Example.COM", "password": password}, format="json")

    assert response.status_code == 200


def test_access_token_authenticates_requests(jwt_client, user):
    response = jwt_client(user).get("/api/v1/auth/me")

    assert response.status_code == 200
    assert response.json()["email"] == user.email


def test_wrong_password_gets_401(anon_client, user):
    response = anon_client.post(URL, {"email": user.email, "password": "wrong-password"}, format="json")

    assert response.status_code == 401
    assert response.json()["detail"]


def test_unknown_email_gets_401(anon_client, password, db):
    response = anon_client.post(URL, {"email": "nobody@example.com", "password": password}, format="json")

    assert response.status_code == 401


def test_inactive_user_gets_401(anon_client, make_user, password):
    make_user("gone@example.com", is_active=False)

    response = anon_client.post(URL, {"email": "gone@example.com", "password": password}, format="json")

    assert response.status_code == 401


@pytest.mark.parametrize("missing", ["email", "password"])
def test_login_without_field_gets_400_naming_it(anon_client, user, password, missing):
    payload = {"email": user.email, "password": password}
    del payload[missing]

    response = anon_client.post(URL, payload, format="json")

    assert response.status_code == 400
    assert missing in response.json()["errors"]
