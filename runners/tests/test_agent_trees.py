"""Agent trees in the catalogue: sub-agents over the API and the admin, and the validation that
keeps every tree well formed (no cycle, a type under one parent per tree, unique names)."""

import re

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from ledger.models import AgentRun, Conversation, RunStatus
from runners.catalogue.trees import build_tree, validate_trees
from runners.models import AgentType, SubAgent

URL = "/api/v1/agent-types"


@pytest.fixture
def types(make_agent_type):
    """root, child_a, child_b and leaf (no edges yet)."""
    return {name: make_agent_type(name=name, slug=name.replace("_", "-"))
            for name in ("root", "child_a", "child_b", "leaf")}


def set_sub_agents(client, parent, *children):
    return client.patch(f"{URL}/{parent.pk}", {"sub_agents": [str(c.pk) for c in children]},
                        format="json")


def link(parent, *children):
    for position, child in enumerate(children):
        SubAgent.objects.create(parent=parent, child=child, position=position)


def test_superuser_sets_ordered_sub_agents_and_reads_them_back(superuser_client, types):
    response = set_sub_agents(superuser_client, types["root"], types["child_b"], types["child_a"])

    assert response.status_code == 200, response.content
    assert response.json()["sub_agents"] == [str(types["child_b"].pk), str(types["child_a"].pk)]
    listed = {t["slug"]: t for t in superuser_client.get(URL).json()["data"]}
    assert listed["root"]["sub_agents"] == [str(types["child_b"].pk), str(types["child_a"].pk)]
    assert listed["root"]["kind"] == "llm"
    assert listed["root"]["save_input_blobs_as_artifacts"] is True


def test_creating_a_type_with_kind_flags_and_sub_agents(superuser_client, types):
    response = superuser_client.post(URL, {
        "name": "Coordinator", "slug": "coordinator", "kind": "workflow",
        "disallow_transfer_to_parent": True, "sub_agents": [str(types["leaf"].pk)],
    }, format="json")

    assert response.status_code == 201, response.content
    created = AgentType.objects.get(slug="coordinator")
    assert (created.kind, created.disallow_transfer_to_parent) == ("workflow", True)
    assert [link.child.name for link in created.sub_agent_links.all()] == ["leaf"]


def test_regular_user_reads_but_cannot_write_sub_agents(user_client, types):
    link(types["root"], types["leaf"])

    assert set_sub_agents(user_client, types["root"]).status_code == 403
    assert user_client.get(f"{URL}/{types['root'].pk}").json()["sub_agents"] == \
        [str(types["leaf"].pk)]


def test_cycle_is_rejected_naming_sub_agents(superuser_client, types):
    link(types["root"], types["child_a"])

    response = set_sub_agents(superuser_client, types["child_a"], types["root"])

    assert response.status_code == 400
    assert "cycle: child_a → root → child_a" in response.json()["errors"]["sub_agents"][0]
    assert not SubAgent.objects.filter(parent=types["child_a"]).exists()


def test_self_as_sub_agent_is_a_cycle(superuser_client, types):
    response = set_sub_agents(superuser_client, types["root"], types["root"])

    assert response.status_code == 400
    assert "cycle" in response.json()["detail"]


def test_type_under_two_parents_in_one_tree_is_rejected(superuser_client, types):
    link(types["root"], types["child_a"], types["child_b"])
    link(types["child_a"], types["leaf"])

    response = set_sub_agents(superuser_client, types["child_b"], types["leaf"])

    assert response.status_code == 400
    assert "'leaf' is under two parents" in response.json()["errors"]["sub_agents"][0]


def test_type_may_sit_in_two_separate_trees(superuser_client, types):
    link(types["child_a"], types["leaf"])

    response = set_sub_agents(superuser_client, types["child_b"], types["leaf"])

    assert response.status_code == 200


def test_duplicate_name_in_a_tree_is_rejected(superuser_client, types, make_agent_type):
    namesake = make_agent_type(name="root", slug="another-root")

    response = set_sub_agents(superuser_client, types["root"], namesake)

    assert response.status_code == 400
    assert "Two agents are named 'root'" in response.json()["errors"]["sub_agents"][0]


def test_rename_that_collides_within_a_tree_is_rejected_naming_name(superuser_client, types):
    link(types["root"], types["child_a"], types["child_b"])

    response = superuser_client.patch(f"{URL}/{types['child_b'].pk}", {"name": "child_a"},
                                      format="json")

    assert response.status_code == 400
    assert "Two agents are named 'child_a'" in response.json()["errors"]["name"][0]


def test_unknown_sub_agent_id_is_rejected(superuser_client, types):
    response = superuser_client.patch(
        f"{URL}/{types['root'].pk}",
        {"sub_agents": ["00000000-0000-0000-0000-000000000000"]}, format="json")

    assert response.status_code == 400
    assert "Unknown agent type" in response.json()["errors"]["sub_agents"][0]


def test_tree_validation_rejects_a_cycle_and_a_colliding_rename(types):
    link(types["root"], types["child_a"])

    with pytest.raises(ValidationError, match="cycle"):
        validate_trees(types["child_a"], children=[types["root"].pk])
    types["child_a"].name = "root"
    with pytest.raises(ValidationError, match="Two agents are named 'root'"):
        validate_trees(types["child_a"])


def test_build_tree_carries_kinds_flags_and_order(types):
    types["child_b"].kind = "workflow"
    types["child_b"].save()
    types["child_a"].disallow_transfer_to_parent = True
    types["child_a"].save()
    link(types["root"], types["child_b"], types["child_a"])
    link(types["child_b"], types["leaf"])

    tree = build_tree(types["root"])

    assert [n.name for n in tree] == ["root", "child_b", "leaf", "child_a"]
    assert tree.parents["leaf"].name == "child_b"
    assert tree.root.sub_agents[0].kind == "workflow"
    assert tree.root.sub_agents[1].disallow_transfer_to_parent is True


# --- admin inline ---------------------------------------------------------------------------

def admin_post_data(agent_type, children):
    data = {
        "name": agent_type.name, "slug": agent_type.slug, "description": "", "expertise": "[]",
        "personality_prompt": "", "primary_model": "",
        "model_params": "{}", "is_active": "on",
        "runner_id": agent_type.runner_id, "kind": "llm", "save_input_blobs_as_artifacts": "on",
        "sub_agent_links-TOTAL_FORMS": str(len(children)), "sub_agent_links-INITIAL_FORMS": "0",
        "sub_agent_links-MIN_NUM_FORMS": "0", "sub_agent_links-MAX_NUM_FORMS": "1000",
    }
    for index, child in enumerate(children):
        data[f"sub_agent_links-{index}-child"] = str(child.pk)
        data[f"sub_agent_links-{index}-position"] = str(index)
    return data


@pytest.fixture
def admin_browser(client, superuser):
    client.force_login(superuser)
    return client


def test_admin_inline_saves_sub_agents(admin_browser, types):
    url = reverse("admin:runners_agenttype_change", args=[types["root"].pk])

    response = admin_browser.post(url, admin_post_data(types["root"],
                                                       [types["child_a"], types["child_b"]]))

    assert response.status_code == 302, response.content[:2000]
    assert [link.child.name for link in types["root"].sub_agent_links.all()] == \
        ["child_a", "child_b"]


def test_admin_inline_rejects_two_children_with_one_name(admin_browser, types, make_agent_type):
    namesake = make_agent_type(name="child_a", slug="child-a-again")
    url = reverse("admin:runners_agenttype_change", args=[types["root"].pk])

    response = admin_browser.post(url, admin_post_data(types["root"], [types["child_a"], namesake]))

    assert response.status_code == 200
    assert "Two agents are named" in response.content.decode()
    assert not SubAgent.objects.exists()


# --- the tree drawn -------------------------------------------------------------------------

def drawn_agents(page: str) -> list[str]:
    return re.findall(r'<g class="agent-node[^"]*" data-agent="([^"]+)"', page)


def test_the_agent_type_page_draws_its_tree_with_each_agents_transfers(admin_browser, types):
    link(types["root"], types["child_a"], types["child_b"])
    link(types["child_b"], types["leaf"])
    types["leaf"].disallow_transfer_to_peers = True
    types["leaf"].save()

    page = admin_browser.get(
        reverse("admin:runners_agenttype_change", args=[types["root"].pk])).content.decode()

    assert drawn_agents(page) == ["root", "child_a", "child_b", "leaf"]
    assert page.count('<line ') == 3
    assert "→ sub-agents, parent, peers" in page  # child_b
    assert "→ parent</text>" in page  # leaf: no peers


def test_the_run_page_marks_the_agent_that_answered_and_links_what_it_names(
        admin_browser, types, make_agent, project, superuser):
    link(types["root"], types["child_a"])
    agent = make_agent(project, types["root"])
    conversation = Conversation.objects.create(
        conversation_id="tree-talk", client_id="tree-talk", project_id=str(project.pk),
        agent_id=str(agent.pk), user_id=str(superuser.pk))
    run = AgentRun.objects.create(
        run_id="run-answered-by-child", event_id="evt-tree", agent_id=str(agent.pk),
        binding_id=f"agent:{agent.pk}", runner_id="builtin:echo", project_id=str(project.pk),
        conversation_id="tree-talk", status=RunStatus.COMPLETED,
        metadata_json={"agent_name": "child_a"})

    page = admin_browser.get(reverse("admin:ledger_agentrun_change",
                                     args=[run.pk])).content.decode()

    assert re.findall(r'class="agent-node agent-answering" data-agent="([^"]+)"', page) == [
        "child_a"]
    assert reverse("admin:ledger_conversation_change", args=[conversation.pk]) in page
    assert reverse("admin:runners_agentinstance_change", args=[agent.pk]) in page
    breadcrumbs = re.search(r'<div class="breadcrumbs">(.*?)</div>', page, re.S).group(1)
    assert "run-answered-by-child" in breadcrumbs and "(" not in breadcrumbs
