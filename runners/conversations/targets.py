"""Who answers a message and how: the agent of the tree whose turn it is, the binding and
runner for it, whether that runner takes the event, and the message's multitask strategy.
Each check raises the door's refusal (`runners.conversations.exceptions`)."""

import fnmatch
import time

from django.conf import settings
from langbot_plugin.api.entities.builtin.runner.interaction import INTERACTION_SUBMITTED_EVENT

from ledger.models import Conversation
from ledger.selectors import conversations as conversation_selectors
from ledger.state_keys import StateIdentity
from runners.catalogue import bindings
from runners.catalogue.agent_routing import (
    AgentNode,
    AgentTree,
    Entry,
    TreeError,
    find_agent_to_run,
    transfer_targets,
)
from runners.catalogue.trees import build_tree
from runners.conversations.exceptions import InvalidInput, RunnerUnavailable, Unroutable
from runners.models import AgentInstance, AgentType
from runners.plugins import command_registry, commands, registry
from runners.plugins.gateway import require_runner_sync
from runners.protocol import ENQUEUE, MESSAGE_EVENT, MULTITASK_STRATEGIES, STEER, AgentBinding


def answering_node(agent: AgentInstance, conversation_id: str | None) -> tuple[AgentTree, AgentNode]:
    """The instance's tree and its agent that answers the next message of the conversation."""
    try:
        tree = build_tree(agent.agent_type)
        return tree, find_agent_to_run(tree, history(conversation_id) if conversation_id else [])
    except TreeError as exc:
        raise Unroutable(f"The agent tree of '{agent.agent_type.name}' is invalid: {exc}") from exc


def agent_binding(agent: AgentInstance, conversation_id: str | None = None,
                  timeout: float | None = None) -> AgentBinding:
    """The agent's binding for a conversation (most specific `Binding` row, else its type's)."""
    try:
        return bindings.resolve(agent=agent, conversation_id=conversation_id, timeout=timeout)
    except bindings.BindingError as exc:
        raise Unroutable(str(exc)) from exc


def node_binding(agent: AgentInstance, tree: AgentTree, node: AgentNode,
                 conversation_id: str | None = None, timeout: float | None = None) -> AgentBinding:
    """The root runs with the agent's binding; a sub-agent with the same binding identity and
    policies, and its own type's runner and config. The config names the agents the answering
    one may hand the turn to (`transfer_to_agent`)."""
    binding = agent_binding(agent, conversation_id, timeout)
    if node.type_id is not None and node.type_id != str(agent.agent_type_id):
        node_type = AgentType.objects.get(pk=node.type_id)
        config = bindings.agent_runner_config(node_type)
        if timeout is not None:
            config["timeout"] = timeout
        binding = binding.model_copy(update={"runner_id": node_type.runner_id,
                                             "runner_config": config})
    binding.runner_config = {**binding.runner_config, "transfer_targets": [
        {"name": target.name, "description": target.description}
        for target in transfer_targets(tree, node)]}
    return binding


def command_binding(agent: AgentInstance, binding: AgentBinding, event_type: str,
                    event_input: dict | None, administrator: bool):
    """`(binding, descriptor)` of the plugin command a message invokes, if it does: it starts
    with the agent type's command prefix and the name of an available command of an enabled
    plugin (LangBot's `!name sub args`). Else None: the agent's runner answers. Commands run
    where the runtime is in this process: through runtime workers, every message reaches the
    runner."""
    prefix = agent.agent_type.command_prefix
    invocation = (commands.parse((event_input or {}).get("text") or "", prefix)
                  if event_type == MESSAGE_EVENT and not settings.LANGHOST_RUNTIME_WORKER
                  else None)
    command = command_registry.find_sync(invocation.name) if invocation else None
    return _bound_to(command, prefix, binding, administrator) if command else None


def queued_command_binding(agent: AgentInstance, binding: AgentBinding, runner_id: str,
                           administrator: bool):
    """`(binding, descriptor)` of the command a queued run was started for (`runner_id`);
    `RunnerUnavailable` if it is gone meanwhile."""
    command = command_registry.find_by_id_sync(runner_id)
    if command is None:
        raise RunnerUnavailable(f"Command '{runner_id}' is not available.")
    return _bound_to(command, agent.agent_type.command_prefix, binding, administrator)


def _bound_to(command, prefix: str, binding: AgentBinding, administrator: bool):
    config = {commands.PREFIX_KEY: prefix,
              commands.PRIVILEGE_KEY: (commands.ADMIN_PRIVILEGE if administrator
                                       else commands.USER_PRIVILEGE)}
    if "timeout" in binding.runner_config:
        config["timeout"] = binding.runner_config["timeout"]
    return (binding.model_copy(update={"runner_id": command.pk, "runner_config": config}),
            command_registry.as_runner(command))


def state_identity(agent: AgentInstance, conversation: Conversation | None = None) -> StateIdentity:
    """The runner state a conversation with this agent reads and writes (its root binding)."""
    binding = agent_binding(agent, conversation.conversation_id if conversation else None)
    return StateIdentity(runner_id=binding.runner_id, binding_identity=binding.binding_id)


def require_runner(runner_id: str):
    """The runner's descriptor, if it is available."""
    try:
        return require_runner_sync(runner_id)
    except registry.RunnerNotFound as exc:
        raise RunnerUnavailable(f"{exc} The agent cannot answer until it is.") from exc


def require_available(runner_id: str, event_type: str):
    """The runner's descriptor, if it is available and takes this event."""
    descriptor = require_runner(runner_id)
    require_usage(descriptor, event_type)
    return descriptor


def require_no_answer(event_type: str, event_input: dict | None) -> None:
    """An answer to a question is given at its own door (`interactions.prepare_answer`),
    which takes it once: no other door passes one on."""
    if event_type == INTERACTION_SUBMITTED_EVENT:
        raise InvalidInput("Answer a run's question at .../conversations/{id}/interactions/"
                           "{interaction_id}.", field="event")
    if (event_input or {}).get("interaction") is not None:
        raise InvalidInput("input.interaction is given by LangHost when a question is "
                           "answered, not by a caller.", field="input")


def answers_messages(descriptor) -> bool:
    """Whether the runner is declared for `agent` usage: it answers messages as such."""
    return "agent" in (descriptor.usages or ["agent"])


def takes_event(descriptor, event_type: str) -> bool:
    """Whether the runner is declared for `event` usage and for this event (`spec.events`)."""
    return "event" in (descriptor.usages or []) and any(
        fnmatch.fnmatchcase(event_type, pattern)
        for pattern in descriptor.supported_event_patterns or ["*"])


def require_usage(descriptor, event_type: str) -> None:
    """A message needs a runner declared for `agent` usage, or for `event` usage with
    `message.received` among its events (LangBot's event runners, which a message reaches as
    that platform event); any other event a runner declared for it."""
    if event_type == MESSAGE_EVENT and answers_messages(descriptor):
        return
    if not takes_event(descriptor, event_type):
        what = "messages" if event_type == MESSAGE_EVENT else f"'{event_type}' events"
        raise InvalidInput(f"Runner '{descriptor.id}' is declared for {descriptor.usages} "
                           f"usage and events {descriptor.supported_event_patterns}; it does "
                           f"not take {what}.",
                           field="input" if event_type == MESSAGE_EVENT else "event")


def platform_event_data(descriptor, event_type: str, data: dict | None, *, text: str | None,
                        event_id: str, actor: dict, conversation_id: str | None) -> dict:
    """`event.data` as LangBot delivers it, where the SDK reads a platform event's `type`.

    A platform event carries its type in its data. A message to a runner that takes it as an
    event (not as an agent) is LangBot's `message.received` platform event: the text as its
    message chain, the actor as its sender. A message to an agent gets only what its sender
    gave.
    """
    data = dict(data or {})
    if event_type != MESSAGE_EVENT:
        return {"type": event_type, **data}
    if answers_messages(descriptor) and "type" not in data:
        return data
    return {"type": MESSAGE_EVENT, "message_id": event_id,
            "message_chain": [{"type": "Plain", "text": text}] if text else [],
            "sender": {"id": actor.get("actor_id") or "",
                       "nickname": actor.get("actor_name") or ""},
            "chat_type": "private", "chat_id": conversation_id or actor.get("actor_id") or "",
            "timestamp": time.time(), **data}


def message_text(event_type: str, data: dict | None, event_input: dict | None) -> dict | None:
    """A `message.received` event sent as an event: its message chain's text is the input."""
    if event_type != MESSAGE_EVENT or (event_input or {}).get("text"):
        return event_input
    chain = (data or {}).get("message_chain") or []
    texts = [part.get("text") for part in chain if isinstance(part, dict)
             and part.get("type") == "Plain" and isinstance(part.get("text"), str)]
    return {**(event_input or {}), "text": " ".join(texts)} if texts else event_input


def multitask_strategy(agent_type: AgentType | None, descriptor, requested: str | None) -> str:
    """What a message does while its conversation has an active run: the request's strategy,
    else its agent type's, else `steer` for a runner that steers and `enqueue` for others."""
    steers = bool((descriptor.capabilities or {}).get("steering"))
    if requested and requested not in MULTITASK_STRATEGIES:
        raise InvalidInput(f"'{requested}' is not one of {', '.join(MULTITASK_STRATEGIES)}.",
                           field="multitask_strategy")
    if requested == STEER and not steers:
        raise InvalidInput(f"Runner '{descriptor.id}' does not declare steering: a message "
                           "cannot join its active run.", field="multitask_strategy")
    chosen = requested or (agent_type.multitask_strategy if agent_type else "")
    if not chosen or (chosen == STEER and not steers):
        return STEER if steers else ENQUEUE
    return chosen


HISTORY_LIMIT = 500


def entry_for(author: str, role: str, content_json) -> Entry:
    """What routing needs from one transcript entry: its author and function call ids."""
    message = content_json if isinstance(content_json, dict) else {}
    calls = [call.get("id") for call in message.get("tool_calls") or []
             if isinstance(call, dict) and call.get("id")]
    responses = [message["tool_call_id"]] if role == "tool" and message.get("tool_call_id") else []
    content = message.get("content")
    for part in content if isinstance(content, list) else []:
        if isinstance(part, dict) and part.get("id"):
            if part.get("type") == "function_call":
                calls.append(part["id"])
            elif part.get("type") == "function_response":
                responses.append(part["id"])
    return Entry(author=author or "", function_calls=tuple(calls),
                 function_responses=tuple(responses))


def history(conversation_id: str) -> list[Entry]:
    """The conversation's recent entries, oldest first, as routing reads them."""
    return [entry_for(*row) for row in
            conversation_selectors.latest_entries(conversation_id, HISTORY_LIMIT)]
