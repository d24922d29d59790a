def test_me_returns_the_current_user(jwt_client, user):
    response = jwt_client(user).get("/api/v1/auth/me")

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == user.id
    assert body["email"] == "alice@example.com"
    assert body["first_name"] == "Alice"
    assert body["last_name"] == "Liddell"
    assert body["is_superuser"] is False
    assert "password" not in body


def test_me_shows_superuser_flag(jwt_client, superuser):
    response = jwt_client(superuser).get("/api/v1/auth/me")

    assert response.json()["is_superuser"] is True


def test_me_without_token_gets_401(anon_client, db):
    assert anon_client.get("/api/v1/auth/me").status_code == 401


def test_me_with_garbage_token_gets_401(jwt_client, db):
    assert jwt_client("garbage.token.here").get("/api/v1/auth/me").status_code == 401


def test_token_of_deactivated_user_gets_401(jwt_client, user, login):
    client = jwt_client(user)
    user.is_active = False
    user.save()

    assert client.get("/api/v1/auth/me").status_code == 401
