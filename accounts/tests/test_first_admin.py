"""A safe first start: on a fresh install, `user/init` makes the first admin only for a caller
on this machine or one holding the setup token `manage.py serve` printed."""

import io
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from rest_framework.test import APIClient

from accounts.first_admin import setup_token
from accounts.models import User
from runners.management.commands.serve import Command as Serve

pytestmark = pytest.mark.django_db

INIT = "/api/v1/user/init"
ADMIN = {"user": "first@example.com", "password": "First-Admin-Passw0rd"}


def init(client, address="203.0.113.7", headers=None, **fields):
    return client.post(INIT, {**ADMIN, **fields}, format="json", REMOTE_ADDR=address,
                       **(headers or {}))


def test_a_caller_from_elsewhere_without_the_token_is_refused(anon_client):
    refused = init(anon_client)

    assert refused.status_code == 403 and refused.json()["code"] == 1
    assert "setup token" in refused.json()["msg"]
    assert not User.objects.exists()


def test_the_printed_token_makes_the_first_admin_once(anon_client):
    printed = io.StringIO()
    Serve(stdout=printed).prepare_database("0.0.0.0", 8000)
    token = setup_token()
    assert token in printed.getvalue()

    assert init(anon_client, setup_token="not-the-token").status_code == 403
    made = init(anon_client, setup_token=token)
    again = init(anon_client, setup_token=token, user="second@example.com")

    assert made.json() == {"code": 0, "msg": "ok"}
    assert User.objects.get().email == ADMIN["user"] and User.objects.get().is_superuser
    assert again.json()["code"] == 1 and User.objects.count() == 1
    assert setup_token() != token  # spent: a new install's token would be another


def test_from_this_machine_no_token_is_needed(anon_client):
    assert init(anon_client, address="127.0.0.1").json() == {"code": 0, "msg": "ok"}


def test_through_a_proxy_on_this_machine_the_token_is_needed(anon_client):
    forwarded = init(anon_client, address="127.0.0.1",
                     headers={"HTTP_X_FORWARDED_FOR": "203.0.113.7"})

    assert forwarded.status_code == 403 and not User.objects.exists()


def test_a_secure_install_needs_the_token_even_from_this_machine(anon_client, settings):
    settings.LANGHOST_SECURE = True

    assert init(anon_client, address="127.0.0.1").status_code == 403
    assert init(anon_client, address="127.0.0.1", setup_token=setup_token()).status_code == 200


def test_the_first_admin_can_be_made_after_someone_registered_first(anon_client):
    registered = anon_client.post("/api/v1/auth/register",
                                  {"email": "early@example.com", "password": "Early-Bird-Passw0rd"},
                                  format="json")
    assert registered.status_code == 202

    made = init(anon_client, setup_token=setup_token())
    taken = User.objects.get(email="early@example.com")

    assert made.json() == {"code": 0, "msg": "ok"}
    assert User.objects.get(email=ADMIN["user"]).is_superuser and not taken.is_superuser


def test_the_first_admin_cannot_take_a_registered_address(anon_client):
    anon_client.post("/api/v1/auth/register",
                     {"email": ADMIN["user"], "password": "Early-Bird-Passw0rd"}, format="json")

    refused = init(anon_client, setup_token=setup_token())

    assert refused.status_code == 400 and refused.json()["msg"].startswith("user:")
    assert not User.objects.filter(is_superuser=True).exists()


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_first_requests_make_exactly_one_superuser():
    start = threading.Barrier(20)

    def ask(n: int) -> dict:
        try:
            start.wait()
            return APIClient().post(INIT, {**ADMIN, "user": f"first-{n}@example.com"},
                                    format="json", REMOTE_ADDR="127.0.0.1").json()
        finally:
            connection.close()

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(ask, range(20)))

    assert sorted(answer["code"] for answer in answers) == [0] + [1] * 19
    assert User.objects.filter(is_superuser=True).count() == 1
