"""Sign-in hygiene: failed sign-ins throttled on every door, tokens that die with a password
change, a deactivation or a logout."""

import pytest
from django.core.cache import cache
from django.test import Client

from runners.tests.langhost_process import langhost_env, manage

pytestmark = pytest.mark.django_db

WRONG = "not-the-password"


@pytest.fixture(autouse=True)
def fresh_counters():
    cache.clear()  # the per-address counter lives in the cache


def api_login(client, email, password):
    return client.post("/api/v1/auth/login", {"email": email, "password": password},
                       format="json")


def langbot_login(client, email, password):
    return client.post("/api/v1/user/auth", {"user": email, "password": password},
                       format="json")


def admin_login(email, password):
    return Client().post("/admin/login/", {"username": email, "password": password})


def fail_ten_times(anon_client, email):
    answers = [api_login(anon_client, email, WRONG).status_code for _ in range(10)]
    assert answers[:9] == [401] * 9 and answers[9] in (401, 429)  # the 10th may lock already


def test_ten_wrong_passwords_lock_the_account_on_every_door(anon_client, user, password,
                                                            make_user):
    other = make_user("other@example.com")
    fail_ten_times(anon_client, user.email)

    api = api_login(anon_client, user.email, password)
    langbot = langbot_login(anon_client, user.email, password)
    admin = admin_login(user.email, password)

    assert api.status_code == 429 and "Too many failed sign-ins" in api.json()["detail"]
    assert int(api["Retry-After"]) > 0
    assert langbot.status_code == 429 and langbot.json()["code"] != 0
    assert admin.status_code == 429
    assert api_login(anon_client, other.email, password).status_code == 200  # others sign in


def test_the_lock_ends_after_the_cooling_period(anon_client, user, password, settings):
    fail_ten_times(anon_client, user.email)
    assert api_login(anon_client, user.email, password).status_code == 429

    from datetime import timedelta
    settings.AXES_COOLOFF_TIME = timedelta(seconds=0)

    assert api_login(anon_client, user.email, password).status_code == 200


def test_failures_on_the_admin_door_count_for_the_api_door(anon_client, user, password):
    answers = [admin_login(user.email, WRONG).status_code for _ in range(10)]
    assert answers[:9] == [200] * 9  # the form again, with its error

    assert api_login(anon_client, user.email, password).status_code == 429


def test_one_address_failing_on_many_accounts_is_stopped(anon_client, user, password,
                                                          settings):
    settings.LANGHOST_SIGNIN_ADDRESS_FAILURES = 5
    for n in range(5):
        assert api_login(anon_client, f"nobody{n}@example.com", WRONG).status_code in (401, 429)

    assert api_login(anon_client, user.email, password).status_code == 429


def test_after_a_password_change_the_old_tokens_are_refused(anon_client, user, password):
    tokens = api_login(anon_client, user.email, password).json()
    user.set_password("A-New-Passw0rd-42")
    user.save()

    refreshed = anon_client.post("/api/v1/auth/refresh",
                                 {"refresh_token": tokens["refresh_token"]}, format="json")
    me = anon_client.get("/api/v1/auth/me",
                         HTTP_AUTHORIZATION=f"Bearer {tokens['access_token']}")

    assert refreshed.status_code == 401 and me.status_code == 401


@pytest.mark.parametrize("gone", ["deactivated", "deleted"])
def test_refresh_is_refused_for_a_deactivated_or_deleted_user(anon_client, user, password,
                                                             gone):
    tokens = api_login(anon_client, user.email, password).json()
    if gone == "deactivated":
        user.is_active = False
        user.save()
    else:
        user.delete()

    refreshed = anon_client.post("/api/v1/auth/refresh",
                                 {"refresh_token": tokens["refresh_token"]}, format="json")

    assert refreshed.status_code == 401


def test_logout_revokes_the_refresh_token(anon_client, user, password):
    tokens = api_login(anon_client, user.email, password).json()

    out = anon_client.post("/api/v1/auth/logout", {"refresh_token": tokens["refresh_token"]},
                           format="json")
    again = anon_client.post("/api/v1/auth/refresh",
                             {"refresh_token": tokens["refresh_token"]}, format="json")

    assert out.status_code == 204
    assert again.status_code == 401 and "blacklisted" in again.json()["detail"]


@pytest.mark.processes  # `manage.py check --deploy`, as an operator runs it
def test_production_settings_pass_the_deploy_check(tmp_path):
    env = langhost_env(tmp_path / "data", tmp_path / "plugins", LANGHOST_SECURE="1")

    checked = manage("check", "--deploy", env=env)

    assert checked.returncode == 0, checked.stderr
    assert "System check identified no issues" in checked.stdout, checked.stdout + checked.stderr
