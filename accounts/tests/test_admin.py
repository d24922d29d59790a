import pytest
from django.contrib import admin
from django.urls import reverse

REGISTERED = sorted(
    (model._meta.app_label, model._meta.model_name) for model in admin.site._registry
)
# The people, projects and agent catalogue models, which the admin can also create.
EDITABLE = [
    ("accounts", "user"),
    ("accounts", "project"),
    ("runners", "agenttype"),
    ("runners", "agentinstance"),
]


@pytest.fixture
def admin_browser(client, superuser, agent, outsider):
    """A superuser signed in to the admin, with one of every model to list."""
    client.force_login(superuser)
    return client


def test_admin_login_page_loads(client):
    assert client.get("/admin/login/").status_code == 200


def test_superuser_signs_in_to_admin_with_email(client, superuser, password):
    response = client.post(
        "/admin/login/?next=/admin/",
        {"username": superuser.email, "password": password},
        follow=True,
    )

    assert response.status_code == 200
    assert response.context["user"] == superuser


def test_regular_user_cannot_use_admin(client, user):
    client.force_login(user)

    response = client.get("/admin/")

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


@pytest.mark.parametrize(("app_label", "model_name"), REGISTERED, ids=[".".join(m) for m in REGISTERED])
def test_changelist_loads(admin_browser, app_label, model_name):
    response = admin_browser.get(reverse(f"admin:{app_label}_{model_name}_changelist"))

    assert response.status_code == 200


def test_every_editable_model_is_registered():
    assert set(EDITABLE) <= set(REGISTERED)


@pytest.mark.parametrize(("app_label", "model_name"), EDITABLE, ids=[".".join(m) for m in EDITABLE])
def test_add_page_loads(admin_browser, app_label, model_name):
    response = admin_browser.get(reverse(f"admin:{app_label}_{model_name}_add"))

    assert response.status_code == 200


@pytest.mark.parametrize(("app_label", "model_name"), REGISTERED, ids=[".".join(m) for m in REGISTERED])
def test_changelist_search_works(admin_browser, app_label, model_name):
    response = admin_browser.get(reverse(f"admin:{app_label}_{model_name}_changelist"), {"q": "a"})

    assert response.status_code == 200


def test_project_change_page_loads(admin_browser, project):
    response = admin_browser.get(reverse("admin:accounts_project_change", args=[project.pk]))

    assert response.status_code == 200


def test_user_change_page_loads(admin_browser, user):
    response = admin_browser.get(reverse("admin:accounts_user_change", args=[user.pk]))

    assert response.status_code == 200


def test_superuser_adds_user_who_can_then_log_in(admin_browser, login, django_user_model, password):
    response = admin_browser.post(
        reverse("admin:accounts_user_add"),
        {"email": "new@example.com", "password1": password, "password2": password,
         "usable_password": "true"},
    )

    assert response.status_code == 302
    assert django_user_model.objects.filter(email="new@example.com").exists()
    assert login("new@example.com", password)["access_token"]
