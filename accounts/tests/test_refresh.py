URL = "/api/v1/auth/refresh"


def test_refresh_returns_a_new_access_token(anon_client, login, user):
    tokens = login(user.email)

    response = anon_client.post(URL, {"refresh_token": tokens["refresh_token"]}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["token_type"] == "bearer"
    assert body["access_token"]


def test_refreshed_access_token_works_on_me(anon_client, login, jwt_client, user):
    tokens = login(user.email)
    access = anon_client.post(URL, {"refresh_token": tokens["refresh_token"]}, format="json").json()[
        "access_token"
    ]

    response = jwt_client(access).get("/api/v1/auth/me")

    assert response.status_code == 200
    assert response.json()["email"] == user.email


def test_garbage_refresh_token_gets_401(anon_client, db):
    response = anon_client.post(URL, {"refresh_token": "not-a-token"}, format="json")

    assert response.status_code == 401


def test_access_token_cannot_be_used_as_refresh_token(anon_client, login, user):
    tokens = login(user.email)

    response = anon_client.post(URL, {"refresh_token": tokens["access_token"]}, format="json")

    assert response.status_code == 401


def test_refresh_without_token_gets_400_naming_it(anon_client, db):
    response = anon_client.post(URL, {}, format="json")

    assert response.status_code == 400
    assert "refresh_token" in response.json()["errors"]
