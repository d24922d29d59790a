import pytest

URL = "/api/v1/auth/register"


@pytest.fixture
def payload(password):
    return {
        "email": "Grace@Example.com",
        "password": password,
        "first_name": "Grace",
        "last_name": "Hopper",
    }


def test_register_answers_202_and_creates_the_account(anon_client, payload, django_user_model):
    response = anon_client.post(URL, payload, format="json")

    assert response.status_code == 202
    assert response.json()["email"] == "grace@example.com"
    grace = django_user_model.objects.get(email="grace@example.com")
    assert (grace.first_name, grace.last_name) == ("Grace", "Hopper")


def test_register_never_returns_the_password(anon_client, payload, password):
    response = anon_client.post(URL, payload, format="json")

    assert "password" not in response.json()
    assert password not in response.content.decode()


def test_registered_user_can_log_in(anon_client, payload, login, password):
    anon_client.post(URL, payload, format="json")

    assert login("grace@example.com", password)["token_type"] == "bearer"


def test_registered_user_is_not_a_superuser(anon_client, payload, django_user_model):
    anon_client.post(URL, {**payload, "is_superuser": True}, format="json")

    grace = django_user_model.objects.get(email="grace@example.com")
    assert not grace.is_superuser
    assert not grace.is_staff


def test_registering_a_taken_address_answers_as_a_free_one_and_changes_nothing(
        anon_client, payload, user, login, password):
    free = anon_client.post(URL, payload, format="json")
    taken = [anon_client.post(URL, {**payload, "email": address,
                                    "password": "Another-Sturdy-Passw0rd"}, format="json")
             for address in ("ALICE@example.com", "alice@example.com")]  # as stored, too

    for answer in taken:
        assert (answer.status_code, answer.json()["detail"]) == (free.status_code,
                                                                 free.json()["detail"])
        assert set(answer.json()) == set(free.json())
    user.refresh_from_db()
    assert (user.first_name, user.last_name) != ("Grace", "Hopper")
    assert login("alice@example.com", password)["token_type"] == "bearer"


@pytest.mark.parametrize("weak", ["123", "password", "12345678901234"])
def test_weak_password_is_rejected_naming_password(anon_client, payload, weak, django_user_model):
    response = anon_client.post(URL, {**payload, "password": weak}, format="json")

    assert response.status_code == 400
    assert "password" in response.json()["errors"]
    assert not django_user_model.objects.filter(email="grace@example.com").exists()


def test_password_like_the_email_is_rejected(anon_client, payload):
    response = anon_client.post(URL, {**payload, "password": "grace@example.com"}, format="json")

    assert response.status_code == 400
    assert "password" in response.json()["errors"]


@pytest.mark.parametrize("missing", ["email", "password"])
def test_register_without_required_field_names_it(anon_client, payload, missing):
    del payload[missing]

    response = anon_client.post(URL, payload, format="json")

    assert response.status_code == 400
    assert missing in response.json()["errors"]


def test_register_with_invalid_email_names_email(anon_client, payload):
    response = anon_client.post(URL, {**payload, "email": "not-an-email"}, format="json")

    assert response.status_code == 400
    assert "email" in response.json()["errors"]
