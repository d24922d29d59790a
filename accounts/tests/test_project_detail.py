def url(project):
    return f"/api/v1/projects/{project.pk}"


def test_owner_gets_project(user_client, project):
    response = user_client.get(url(project))

    assert response.status_code == 200
    assert response.json()["id"] == str(project.pk)
    assert response.json()["slug"] == "apollo"


def test_owner_patches_name_and_keeps_slug(user_client, project):
    response = user_client.patch(url(project), {"name": "Artemis"}, format="json")

    assert response.status_code == 200
    project.refresh_from_db()
    assert project.name == "Artemis"
    assert project.slug == "apollo"


def test_patch_to_a_taken_slug_is_rejected_naming_slug(user_client, user, project, make_project):
    make_project(user, slug="gemini")

    response = user_client.patch(url(project), {"slug": "gemini"}, format="json")

    assert response.status_code == 400
    assert "slug" in response.json()["errors"]


def test_owner_deletes_project(user_client, project):
    response = user_client.delete(url(project))

    assert response.status_code == 204
    assert user_client.get(url(project)).status_code == 404


def test_superuser_gets_any_project(superuser_client, project):
    assert superuser_client.get(url(project)).status_code == 200


def test_superuser_patches_any_project(superuser_client, project):
    response = superuser_client.patch(url(project), {"name": "Renamed"}, format="json")

    assert response.status_code == 200
    assert response.json()["name"] == "Renamed"


def test_unknown_project_gets_404(user_client):
    assert user_client.get("/api/v1/projects/00000000-0000-0000-0000-000000000000").status_code == 404


def test_malformed_project_id_gets_404(user_client):
    assert user_client.get("/api/v1/projects/not-a-uuid").status_code == 404
