def members_url(project):
    return f"/api/v1/projects/{project.pk}/members"


def test_owner_adds_member_by_email(user_client, project, outsider):
    response = user_client.post(members_url(project), {"email": "MALLORY@example.com"}, format="json")

    assert response.status_code == 201
    assert response.json()["email"] == "mallory@example.com"
    assert "password" not in response.json()


def test_members_list_uses_the_envelope(user_client, make_project, user, outsider):
    project = make_project(user, members=[outsider])

    body = user_client.get(members_url(project)).json()

    assert [m["email"] for m in body["data"]] == ["mallory@example.com"]
    assert body["pagination"]["total"] == 1


def test_added_member_can_read_the_project(user_client, outsider_client, project):
    user_client.post(members_url(project), {"email": "mallory@example.com"}, format="json")

    response = outsider_client.get(f"/api/v1/projects/{project.pk}")

    assert response.status_code == 200


def test_added_member_can_read_the_projects_agents(user_client, outsider_client, agent):
    user_client.post(members_url(agent.project), {"email": "mallory@example.com"}, format="json")

    response = outsider_client.get(f"/api/v1/projects/{agent.project_id}/agents/{agent.pk}")

    assert response.status_code == 200
    assert response.json()["name"] == "Ada"


def test_adding_a_member_twice_keeps_one_membership(user_client, project, outsider):
    user_client.post(members_url(project), {"email": outsider.email}, format="json")
    response = user_client.post(members_url(project), {"email": outsider.email}, format="json")

    assert response.status_code == 200
    assert list(project.members.all()) == [outsider]


def test_unknown_email_is_rejected_naming_email(user_client, project):
    response = user_client.post(members_url(project), {"email": "nobody@example.com"}, format="json")

    assert response.status_code == 400
    assert "email" in response.json()["errors"]


def test_member_cannot_add_members(user_client, outsider, make_project, user, make_user):
    shared = make_project(outsider, members=[user])
    make_user("eve@example.com")

    response = user_client.post(members_url(shared), {"email": "eve@example.com"}, format="json")

    assert response.status_code == 403


def test_owner_removes_member(user_client, make_project, user, outsider, outsider_client):
    project = make_project(user, members=[outsider])

    response = user_client.delete(f"{members_url(project)}/{outsider.id}")

    assert response.status_code == 204
    assert outsider_client.get(f"/api/v1/projects/{project.pk}").status_code == 404
