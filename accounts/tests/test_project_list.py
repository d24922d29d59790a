import pytest

pytestmark = pytest.mark.backend


URL = "/api/v1/projects"


def names(response):
    return sorted(project["name"] for project in response.json()["data"])


def test_list_shows_own_projects_only(user_client, user, outsider, make_project):
    make_project(user, name="Mine")
    make_project(outsider, name="Theirs")

    assert names(user_client.get(URL)) == ["Mine"]


def test_list_includes_projects_the_user_is_a_member_of(user_client, user, outsider, make_project):
    make_project(outsider, name="Shared", members=[user])

    assert names(user_client.get(URL)) == ["Shared"]


def test_superuser_sees_all_projects(superuser_client, user, outsider, make_project):
    make_project(user, name="Mine")
    make_project(outsider, name="Theirs")

    assert names(superuser_client.get(URL)) == ["Mine", "Theirs"]


def test_list_uses_the_envelope(user_client, project):
    body = user_client.get(URL).json()

    assert set(body) == {"data", "pagination"}
    assert body["pagination"] == {
        "total": 1,
        "page": 1,
        "page_size": 20,
        "total_pages": 1,
        "has_next": False,
        "has_prev": False,
    }


def test_list_pages_with_page_and_page_size(user_client, user, make_project):
    for i in range(5):
        make_project(user, name=f"P{i}")

    body = user_client.get(URL, {"page": 2, "page_size": 2}).json()

    assert [p["name"] for p in body["data"]] == ["P2", "P3"]
    assert body["pagination"] == {
        "total": 5,
        "page": 2,
        "page_size": 2,
        "total_pages": 3,
        "has_next": True,
        "has_prev": True,
    }


def test_list_filters_by_slug(user_client, user, make_project):
    make_project(user, name="A", slug="alpha")
    make_project(user, name="B", slug="beta")

    assert names(user_client.get(URL, {"slug": "beta"})) == ["B"]


def test_page_past_the_end_gets_404(user_client, project):
    response = user_client.get(URL, {"page": 9})

    assert response.status_code == 404
    assert response.json()["detail"]
