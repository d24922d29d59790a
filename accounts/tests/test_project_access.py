"""Outsiders get 404 for a project and everything under it; members read."""

import pytest

from accounts.models import Project


def url(project):
    return f"/api/v1/projects/{project.pk}"


@pytest.mark.parametrize("method", ["get", "patch", "delete"])
def test_outsider_gets_404_for_project(outsider_client, project, method):
    response = getattr(outsider_client, method)(url(project), {"name": "Mine now"}, format="json")

    assert response.status_code == 404


def test_outsider_cannot_delete_project(outsider_client, project):
    outsider_client.delete(url(project))

    assert Project.objects.filter(pk=project.pk).exists()


def test_outsider_gets_404_for_members(outsider_client, project):
    assert outsider_client.get(f"{url(project)}/members").status_code == 404


def test_member_reads_project(user_client, outsider, make_project, user):
    shared = make_project(outsider, members=[user])

    assert user_client.get(url(shared)).status_code == 200


def test_member_gets_403_changing_project(user_client, outsider, make_project, user):
    shared = make_project(outsider, name="Theirs", members=[user])

    response = user_client.patch(url(shared), {"name": "Mine"}, format="json")

    assert response.status_code == 403
    shared.refresh_from_db()
    assert shared.name == "Theirs"


def test_member_gets_403_deleting_project(user_client, outsider, make_project, user):
    shared = make_project(outsider, members=[user])

    assert user_client.delete(url(shared)).status_code == 403
