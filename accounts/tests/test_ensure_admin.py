from io import StringIO

import pytest
from django.core.management import call_command


def run():
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    return out.getvalue()


@pytest.fixture
def admin_env(db, monkeypatch, password):
    monkeypatch.setenv("LANGHOST_ADMIN_EMAIL", "Root@Example.com")
    monkeypatch.setenv("LANGHOST_ADMIN_PASSWORD", password)


def test_creates_superuser_from_env(admin_env, django_user_model):
    output = run()

    root = django_user_model.objects.get(email="root@example.com")
    assert root.is_superuser and root.is_staff
    assert "Created" in output


def test_created_admin_can_log_in(admin_env, login, password):
    run()

    assert login("root@example.com", password)["token_type"] == "bearer"


def test_is_idempotent(admin_env, django_user_model):
    run()
    output = run()

    assert django_user_model.objects.filter(email="root@example.com").count() == 1
    assert "already exists" in output


def test_does_not_reset_an_existing_admins_password(admin_env, monkeypatch, login, password):
    run()
    monkeypatch.setenv("LANGHOST_ADMIN_PASSWORD", "Another-Passw0rd-99")
    run()

    assert login("root@example.com", password)["access_token"]


def test_without_env_explains_how_to_create_an_admin(monkeypatch, django_user_model, db):
    monkeypatch.delenv("LANGHOST_ADMIN_EMAIL", raising=False)
    monkeypatch.delenv("LANGHOST_ADMIN_PASSWORD", raising=False)

    output = run()

    assert "createsuperuser" in output
    assert not django_user_model.objects.exists()


def test_existing_regular_user_is_reported_not_promoted(admin_env, make_user):
    regular = make_user("root@example.com")

    output = run()

    regular.refresh_from_db()
    assert not regular.is_superuser
    assert "not a superuser" in output
