"""Passwords as the server stores them (the other tests use a fast hasher)."""

import pytest
from django.contrib.auth.hashers import make_password

from langhost import settings as project_settings

URL = "/api/v1/auth/login"


@pytest.fixture
def project_hashers(settings):
    settings.PASSWORD_HASHERS = project_settings.PASSWORD_HASHERS


def test_a_new_password_is_stored_as_argon2(project_hashers, user, password):
    user.set_password(password)
    user.save()

    user.refresh_from_db()
    assert user.password.startswith("argon2$argon2id$")
    assert user.check_password(password)


def test_an_older_pbkdf2_password_signs_in_and_is_upgraded(project_hashers, anon_client, user,
                                                           password):
    user.password = make_password(password, hasher="pbkdf2_sha256")
    user.save()

    response = anon_client.post(URL, {"email": user.email, "password": password}, format="json")

    assert response.status_code == 200
    user.refresh_from_db()
    assert user.password.startswith("argon2$")
