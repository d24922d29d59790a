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


def test_duplicate_slug_is_rejected_naming_slug(user_client, make_project, outsider):
    make_project(outsider, slug="apollo")

    response = user_client.post(URL, {"name": "Apollo", "slug": "apollo"}, format="json")

    assert response.status_code == 400
    assert "slug" in response.json()["errors"]


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
