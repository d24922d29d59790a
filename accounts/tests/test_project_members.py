import pytest

pytestmark = pytest.mark.backend


def members_url(project):
    return f"/api/v1/projects/{project.pk}/members"


def invite(owner_client, project, email) -> str:
    """The code the owner is shown."""
    return owner_client.post(members_url(project), {"email": email}, format="json").json()["code"]


def invite_and_accept(owner_client, invitee_client, project, email="mallory@example.com"):
    code = invite(owner_client, project, email)
    invitation = invitee_client.get("/api/v1/invitations").json()["data"][0]
    return invitee_client.post(f"/api/v1/invitations/{invitation['id']}/accept", {"code": code},
                               format="json")


def test_inviting_says_the_same_whether_an_account_has_the_email_or_not(user_client,
                                                                        project, outsider):
    known = user_client.post(members_url(project), {"email": "MALLORY@example.com"},
                             format="json")
    unknown = user_client.post(members_url(project), {"email": "nobody@example.com"},
                               format="json")

    assert (known.status_code, known.json().keys()) == (202, unknown.json().keys())
    assert (known.json()["email"], known.json()["status"]) == ("mallory@example.com", "invited")
    assert (unknown.json()["email"], unknown.json()["status"]) == ("nobody@example.com",
                                                                   "invited")
    assert list(project.members.all()) == []  # nobody joins without accepting


def test_the_invitee_sees_the_invitation_and_joins_by_accepting(user_client, outsider_client,
                                                               project, outsider):
    code = invite(user_client, project, outsider.email)

    invitations = outsider_client.get("/api/v1/invitations").json()["data"]
    joined = outsider_client.post(f"/api/v1/invitations/{invitations[0]['id']}/accept",
                                  {"code": code}, format="json")

    assert [(i["project_name"], i["invited_by"]) for i in invitations] == [
        (project.name, project.owner.email)]
    assert joined.status_code == 200 and joined.json()["id"] == str(project.pk)
    assert list(project.members.all()) == [outsider]
    assert outsider_client.get("/api/v1/invitations").json()["data"] == []


def test_someone_elses_invitation_cannot_be_accepted_or_declined(user_client, project,
                                                                 outsider, make_user,
                                                                 jwt_client):
    code = invite(user_client, project, outsider.email)
    invitation = project.invitations.get()
    eve = jwt_client(make_user("eve@example.com"))

    assert eve.post(f"/api/v1/invitations/{invitation.pk}/accept", {"code": code},
                    format="json").status_code == 404
    assert eve.delete(f"/api/v1/invitations/{invitation.pk}").status_code == 404
    assert list(project.members.all()) == []


def test_declining_ends_the_invitation(user_client, outsider_client, project, outsider):
    user_client.post(members_url(project), {"email": outsider.email}, format="json")
    invitation = project.invitations.get()

    assert outsider_client.delete(f"/api/v1/invitations/{invitation.pk}").status_code == 204
    assert not project.invitations.exists() and list(project.members.all()) == []


def test_members_list_uses_the_envelope(user_client, make_project, user, outsider):
    project = make_project(user, members=[outsider])

    body = user_client.get(members_url(project)).json()

    assert [m["email"] for m in body["data"]] == ["mallory@example.com"]
    assert body["pagination"]["total"] == 1


def test_added_member_can_read_the_project(user_client, outsider_client, project):
    invite_and_accept(user_client, outsider_client, project)

    response = outsider_client.get(f"/api/v1/projects/{project.pk}")

    assert response.status_code == 200


def test_added_member_can_read_the_projects_agents(user_client, outsider_client, agent):
    invite_and_accept(user_client, outsider_client, agent.project)

    response = outsider_client.get(f"/api/v1/projects/{agent.project_id}/agents/{agent.pk}")

    assert response.status_code == 200
    assert response.json()["name"] == "Ada"


def test_inviting_a_member_twice_keeps_one_membership(user_client, outsider_client, project,
                                                     outsider):
    invite_and_accept(user_client, outsider_client, project)
    again = invite_and_accept(user_client, outsider_client, project)

    assert again.status_code == 200
    assert list(project.members.all()) == [outsider]


def test_an_invalid_email_is_refused_naming_email(user_client, project):
    response = user_client.post(members_url(project), {"email": "not an email"}, format="json")

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


def test_registering_an_invited_address_first_does_not_join_the_project(user_client, project,
                                                                         make_user, jwt_client):
    invite(user_client, project, "newcomer@example.com")
    squatter = jwt_client(make_user("newcomer@example.com"))  # registered after the invitation
    (invitation,) = squatter.get("/api/v1/invitations").json()["data"]

    without = squatter.post(f"/api/v1/invitations/{invitation['id']}/accept", {}, format="json")
    guessed = squatter.post(f"/api/v1/invitations/{invitation['id']}/accept",
                            {"code": "guessed"}, format="json")

    assert without.status_code == 400 and "code" in without.json()["errors"]
    assert guessed.status_code == 400 and "code" in guessed.json()["errors"]
    assert list(project.members.all()) == []


def test_inviting_again_issues_a_new_code_and_the_old_one_stops_working(
        user_client, outsider_client, project, outsider):
    first = invite(user_client, project, outsider.email)
    second = invite(user_client, project, outsider.email)
    (invitation,) = outsider_client.get("/api/v1/invitations").json()["data"]
    accept = f"/api/v1/invitations/{invitation['id']}/accept"

    assert outsider_client.post(accept, {"code": first}, format="json").status_code == 400
    assert outsider_client.post(accept, {"code": second}, format="json").status_code == 200
    assert list(project.members.all()) == [outsider]
