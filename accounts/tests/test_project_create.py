import uuid

URL = "/api/v1/projects"


def test_create_project_returns_201_with_uuid_id(jwt_client, user):
    response = jwt_client(user).post(
        URL, {"name": "Apollo", "slug": "apollo", "description": "Moon shot"}, format="json"
    )

    assert response.status_code == 201
    body = response.json()
    assert isinstance(body["id"], str)
    assert str(uuid.UUID(body["id"])) == body["id"]
    assert body["name"] == "Apollo"
    assert body["slug"] == "apollo"
    assert body["description"] == "Moon shot"


def test_creator_becomes_owner(user_client, user):
    body = user_client.post(URL, {"name": "Apollo", "slug": "apollo"}, format="json").json()

    assert body["owner_id"] == user.id


def test_owner_cannot_be_chosen_by_the_caller(user_client, user, outsider):
    body = user_client.post(
        URL, {"name": "Apollo", "slug": "apollo", "owner_id": outsider.id}, format="json"
    ).json()

    assert body["owner_id"] == user.id


def test_description_is_optional(user_client):
    response = user_client.post(URL, {"name": "Apollo", "slug": "apollo"}, format="json")

    assert response.status_code == 201
    assert response.json()["description"] == ""


def test_a_slug_you_already_use_is_rejected_naming_slug(user_client, make_project, user):
    make_project(user, slug="apollo")

    response = user_client.post(URL, {"name": "Apollo", "slug": "apollo"}, format="json")

    assert response.status_code == 400
    assert "slug" in response.json()["errors"]


def test_two_people_may_each_have_a_project_demo(user_client, make_project, outsider):
    make_project(outsider, slug="demo")

    response = user_client.post(URL, {"name": "Demo", "slug": "demo"}, format="json")

    assert response.status_code == 201
    assert response.json()["slug"] == "demo"


def test_a_project_without_a_slug_gets_one_from_its_name(user_client):
    first = user_client.post(URL, {"name": "Moon Shot 2"}, format="json")
    second = user_client.post(URL, {"name": "Moon shot 2"}, format="json")

    assert (first.status_code, second.status_code) == (201, 201)
    assert (first.json()["slug"], second.json()["slug"]) == ("moon-shot-2", "moon-shot-2-2")


def test_invalid_slug_is_rejected_naming_slug(user_client):
    response = user_client.post(URL, {"name": "Apollo", "slug": "not a slug!"}, format="json")

    assert response.status_code == 400
    assert "slug" in response.json()["errors"]


def test_missing_name_is_rejected_naming_name(user_client):
    response = user_client.post(URL, {"slug": "apollo"}, format="json")

    assert response.status_code == 400
    assert "name" in response.json()["errors"]


def test_oversize_name_is_rejected_naming_name(user_client):
    response = user_client.post(URL, {"name": "x" * 10_000, "slug": "apollo"}, format="json")

    assert response.status_code == 400
    assert "name" in response.json()["errors"]


def test_oversize_description_is_rejected_naming_description(user_client):
    response = user_client.post(
        URL, {"name": "Apollo", "slug": "apollo", "description": "x" * 10_001}, format="json"
    )

    assert response.status_code == 400
    assert "description" in response.json()["errors"]
