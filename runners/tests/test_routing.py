"""Agent-tree routing per agent-tree-semantics.md section 9 (R1-R8, F1-F7, T1-T3).

The routing tree is built in full, with its parent map: root (LLM) with children
no_transfer_agent (LLM, disallow_transfer_to_parent) and allows_transfer_agent (LLM).
"""

import logging

import pytest

from runners.catalogue.agent_routing import (
    AgentNode,
    AgentTree,
    Entry,
    TreeError,
    find_agent,
    find_agent_to_run,
    find_sub_agent,
    is_transferable,
    transfer_targets,
)


def routing_tree() -> AgentTree:
    return AgentTree(AgentNode("root", sub_agents=[
        AgentNode("no_transfer_agent", disallow_transfer_to_parent=True),
        AgentNode("allows_transfer_agent"),
    ]))


def said(author, calls=(), responses=()):
    return Entry(author, function_calls=tuple(calls), function_responses=tuple(responses))


def chosen(tree, history, message=None) -> str:
    return find_agent_to_run(tree, history, message).name


# --- find_agent_to_run ----------------------------------------------------------------------

def test_r1_last_entry_by_transferable_agent_keeps_the_floor():
    assert chosen(routing_tree(), [said("user"), said("allows_transfer_agent")]) == \
        "allows_transfer_agent"


def test_r2_last_entry_by_agent_that_disallows_transfer_goes_back_to_root():
    assert chosen(routing_tree(), [said("user"), said("no_transfer_agent")]) == "root"


def test_r3_no_agent_entries_runs_the_root():
    assert chosen(routing_tree(), []) == "root"
    assert chosen(routing_tree(), [said("user"), said("user")]) == "root"


def test_r4_function_response_goes_to_the_agent_that_made_the_call_whatever_its_flags():
    history = [said("user"), said("no_transfer_agent", calls=["fn_id"]), said("root")]

    assert chosen(routing_tree(), history, said("user", responses=["fn_id"])) == \
        "no_transfer_agent"


def test_r5_scan_continues_past_a_newer_non_transferable_agent():
    history = [said("allows_transfer_agent"), said("no_transfer_agent")]

    assert chosen(routing_tree(), history) == "allows_transfer_agent"


def test_r6_unknown_newest_author_is_skipped_and_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="runners.catalogue.agent_routing"):
        assert chosen(routing_tree(), [said("allows_transfer_agent"), said("ghost")]) == \
            "allows_transfer_agent"
        assert chosen(routing_tree(), [said("ghost")]) == "root"

    assert "Event from an unknown agent" in caplog.text


def test_r7_grandchild_under_a_child_that_disallows_transfer_goes_to_root():
    tree = AgentTree(AgentNode("root", sub_agents=[
        AgentNode("strict", disallow_transfer_to_parent=True,
                  sub_agents=[AgentNode("grandchild")]),
    ]))

    assert chosen(tree, [said("grandchild")]) == "root"


def test_r7_grandchild_under_a_workflow_agent_goes_to_root():
    tree = AgentTree(AgentNode("root", sub_agents=[
        AgentNode("pipeline", kind="workflow", sub_agents=[AgentNode("step")]),
    ]))

    assert chosen(tree, [said("step")]) == "root"


def test_r8_function_response_with_unknown_call_id_falls_back_to_the_scan():
    history = [said("no_transfer_agent", calls=["fn_id"]), said("allows_transfer_agent")]

    assert chosen(routing_tree(), history, said("user", responses=["other_id"])) == \
        "allows_transfer_agent"


def test_function_call_by_unknown_agent_is_logged_and_falls_back_to_the_scan(caplog):
    history = [said("allows_transfer_agent"), said("ghost", calls=["fn_id"])]

    with caplog.at_level(logging.WARNING, logger="runners.catalogue.agent_routing"):
        assert chosen(routing_tree(), history, said("user", responses=["fn_id"])) == \
            "allows_transfer_agent"

    assert "Function call from an unknown agent" in caplog.text


def test_root_entry_keeps_an_llm_root_and_a_non_llm_root_still_runs():
    assert chosen(routing_tree(), [said("root")]) == "root"
    workflow_root = AgentTree(AgentNode("flow", kind="workflow", sub_agents=[AgentNode("a")]))
    assert chosen(workflow_root, [said("a")]) == "flow"


# --- find_agent -------------------------------------------------------------------------------

def test_f1_finds_an_agent_in_the_tree():
    tree = routing_tree()

    assert find_agent(tree.root, "allows_transfer_agent") is tree.root.sub_agents[1]


def test_f2_one_node_tree_finds_itself():
    only = AgentNode("solo")

    assert find_agent(only, "solo") is only


def test_f3_missing_name_gives_none():
    assert find_agent(routing_tree().root, "nobody") is None


def test_f4_empty_tree_gives_none():
    assert find_agent(None, "root") is None
    assert find_agent_to_run(AgentTree(None), [said("root")]) is None


def test_f5_every_node_of_a_deeper_tree_resolves_and_unknown_does_not():
    grandchild = AgentNode("grandchild")
    child1, child2 = AgentNode("child1"), AgentNode("child2", sub_agents=[grandchild])
    root = AgentNode("root", sub_agents=[child1, child2])
    AgentTree(root)

    assert [find_agent(root, n) for n in ("root", "child1", "child2", "grandchild")] == \
        [root, child1, child2, grandchild]
    assert find_agent(root, "unknown") is None


def test_f6_search_in_a_subtree_and_sub_agent_search_excludes_self():
    grandchild = AgentNode("grandchild")
    child2 = AgentNode("child2", sub_agents=[grandchild])

    assert find_agent(child2, "grandchild") is grandchild
    assert find_sub_agent(child2, "grandchild") is grandchild
    assert find_sub_agent(child2, "child2") is None


def test_f7_duplicate_name_is_rejected():
    with pytest.raises(TreeError, match="Two agents are named 'root'"):
        AgentTree(AgentNode("root", sub_agents=[AgentNode("a", sub_agents=[AgentNode("root")])]))


def test_f7_one_agent_under_two_parents_is_rejected():
    shared = AgentNode("shared")

    with pytest.raises(TreeError, match="'shared' is under two parents"):
        AgentTree(AgentNode("root", sub_agents=[AgentNode("a", sub_agents=[shared]),
                                                AgentNode("b", sub_agents=[shared])]))


def test_f7_cycle_is_rejected():
    a = AgentNode("a")
    b = AgentNode("b", sub_agents=[a])
    a.sub_agents.append(b)

    with pytest.raises(TreeError, match="cycle: a → b → a"):
        AgentTree(a)


# --- is_transferable --------------------------------------------------------------------------

def test_t1_llm_agent_that_disallows_transfer_to_parent_is_not_transferable():
    tree = routing_tree()

    assert not is_transferable(tree, find_agent(tree.root, "no_transfer_agent"))


def test_t2_non_llm_agent_is_not_transferable():
    tree = AgentTree(AgentNode("root", sub_agents=[AgentNode("flow", kind="workflow")]))

    assert not is_transferable(tree, find_agent(tree.root, "flow"))


def test_t3_default_llm_agent_with_llm_ancestors_is_transferable():
    tree = routing_tree()

    assert is_transferable(tree, find_agent(tree.root, "allows_transfer_agent"))
    assert is_transferable(tree, tree.root)


def test_disallow_transfer_to_peers_plays_no_part():
    tree = AgentTree(AgentNode("root", sub_agents=[
        AgentNode("loner", disallow_transfer_to_peers=True)]))

    assert is_transferable(tree, find_agent(tree.root, "loner"))
    assert chosen(tree, [said("loner")]) == "loner"


def test_root_that_disallows_transfer_makes_every_agent_non_transferable():
    tree = AgentTree(AgentNode("root", disallow_transfer_to_parent=True,
                               sub_agents=[AgentNode("a")]))

    assert not is_transferable(tree, find_agent(tree.root, "a"))
    assert chosen(tree, [said("a")]) == "root"


# --- transfer_to_agent targets ---------------------------------------------------------------

def names(nodes) -> list[str]:
    return [node.name for node in nodes]


def test_root_offers_its_sub_agents_only():
    tree = routing_tree()

    assert names(transfer_targets(tree, tree.root)) == ["no_transfer_agent",
                                                        "allows_transfer_agent"]


def test_a_child_offers_its_parent_and_peers_unless_disallowed():
    tree = routing_tree()
    allows, no_parent = tree.root.sub_agents[1], tree.root.sub_agents[0]

    assert names(transfer_targets(tree, allows)) == ["root", "no_transfer_agent"]
    assert names(transfer_targets(tree, no_parent)) == ["allows_transfer_agent"]


def test_no_peers_when_peer_transfer_is_disallowed_and_no_parent_that_is_a_workflow():
    billing = AgentNode("billing", disallow_transfer_to_peers=True)
    tree = AgentTree(AgentNode("flow", kind="workflow", sub_agents=[billing, AgentNode("help")]))

    assert transfer_targets(tree, billing) == []
