def test_unknown_api_url_answers_json_404(user_client):
    response = user_client.get("/api/v1/projects/not-a-uuid/agents")

    assert response.status_code == 404
    assert "No API endpoint matches" in response.json()["detail"]
