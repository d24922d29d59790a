"""The context payload a runner receives, and the authorization frozen with its run.

The payload is validated with the SDK's own `RunnerContext` before it leaves the host, so a
runner never receives a context its SDK would refuse. It leaves as built: the runner's SDK
reads it into the same `RunnerContext`, defaults filled in, which they would make a quarter
longer on every hop to the runner.
"""

from langbot_plugin.api.entities.builtin.runner.context import RunnerContext

from ledger.state_keys import scope_key
from runners.grants.llm import NO_GRANTS, ModelGrants
from runners.models import RunnerDescriptor
from runners.protocol import HOST_NAME, AgentBinding, AgentEventEnvelope


def state_context(event: AgentEventEnvelope, binding: AgentBinding, runner_id: str) -> dict:
    """`{scope: {"scope_key", "identity"}}` for each enabled scope whose identity is known."""
    policy = binding.state_policy
    if not policy.enable_state:
        return {}
    identity = {
        "conversation_id": event.conversation_id or "",
        "thread_id": event.thread_id or "",
        "actor_type": event.actor.actor_type if event.actor.actor_id else "",
        "actor_id": event.actor.actor_id or "",
        "subject_type": event.subject.subject_type if event.subject else "",
        "subject_id": (event.subject.subject_id if event.subject else None) or "",
        "project_id": event.project_id or "",
    }
    scopes = {}
    for scope in dict.fromkeys(policy.state_scopes):
        key = scope_key(scope, runner_id=runner_id, binding_identity=binding.binding_id, **identity)
        if key:
            scopes[scope] = {
                "scope_key": key,
                "identity": {**identity, "runner_id": runner_id,
                             "binding_identity": binding.binding_id},
            }
    return scopes


def storage_grants(binding: AgentBinding, descriptor: RunnerDescriptor) -> dict[str, bool]:
    """The run's storage: its plugin's own storage when the manifest asks for it and the
    policy allows it. LangHost keeps no workspace storage (the SDK's runtime has it only when
    bound to a LangBot workspace): never granted, whatever the policy says."""
    asked = (descriptor.permissions or {}).get("storage") or []
    return {"plugin_storage": "plugin" in asked and binding.resource_policy.allow_plugin_storage,
            "workspace_storage": False}


def available_apis(event: AgentEventEnvelope, binding: AgentBinding,
                   descriptor: RunnerDescriptor) -> dict[str, bool]:
    permissions = descriptor.permissions or {}
    capabilities = descriptor.capabilities or {}
    has_conversation = bool(event.conversation_id)
    return {
        "state": binding.state_policy.enable_state and bool(binding.state_policy.state_scopes),
        "history_page": "page" in (permissions.get("history") or []) and has_conversation,
        "history_search": "search" in (permissions.get("history") or []) and has_conversation,
        "event_get": "get" in (permissions.get("events") or []),
        "event_page": "page" in (permissions.get("events") or []) and has_conversation,
        "steering_pull": bool(capabilities.get("steering")) and has_conversation,
        "run_get": True,
        "run_events_page": True,
        "run_cancel": True,
        "run_list": has_conversation,
        "run_append_result": False,
        "run_finalize": False,
        "prompt_get": bool(binding.runner_config.get("prompt")),
        "storage": storage_grants(binding, descriptor)["plugin_storage"],
        "box": binding.runner_config.get("box") is True and has_conversation,
        "reply_stream": False,
    }


def authorization_snapshot(event: AgentEventEnvelope, binding: AgentBinding,
                           descriptor: RunnerDescriptor, apis: dict, scopes: dict,
                           grants: ModelGrants = NO_GRANTS, tools: list[dict] = (),
                           knowledge: list[dict] = (), skills: list[dict] = ()) -> dict:
    """What in-run API calls are checked against, persisted on the run row."""
    return {
        "runner_id": descriptor.id,
        "binding_id": binding.binding_id,
        "plugin_identity": descriptor.plugin_identity,
        "available_apis": apis,
        "state_policy": binding.state_policy.model_dump(),
        "state_context": scopes,
        "conversation_id": event.conversation_id or "",
        "thread_id": event.thread_id or "",
        "project_id": event.project_id or "",
        "prompt": binding.runner_config.get("prompt") or "",
        "resources": {"models": grants.models, "tools": list(tools),
                      "knowledge_bases": list(knowledge), "skills": list(skills)},
    }


def build_context(*, run_id: str, event: AgentEventEnvelope, binding: AgentBinding,
                  apis: dict, state: dict, deadline_at: float | None,
                  latest_cursor: str | None = None,
                  grants: ModelGrants = NO_GRANTS, tools: list[dict] = (),
                  knowledge: list[dict] = (), skills: list[dict] = (),
                  runner_input: dict | None = None) -> dict:
    conversation = None
    if event.conversation_id:
        conversation = {
            "conversation_id": event.conversation_id,
            "thread_id": event.thread_id,
            "sender_id": event.actor.actor_id,
            "workspace_id": event.project_id,
        }
    payload = {
        "run_id": run_id,
        "trigger": {"type": event.event_type, "source": event.trigger_source,
                    "timestamp": event.event_time},
        "event": {
            "event_id": event.event_id, "event_type": event.event_type,
            "event_time": event.event_time, "source": event.source,
            "source_event_type": event.source_event_type, "data": event.data,
        },
        "conversation": conversation,
        "actor": event.actor.model_dump(),
        "subject": event.subject.model_dump() if event.subject else None,
        "input": runner_input or event.input.model_dump(exclude_none=True),
        "delivery": {
            **event.delivery.model_dump(),
            "supports_streaming": event.delivery.supports_streaming
            and binding.delivery_policy.enable_streaming,
        },
        "resources": {
            "models": grants.models,
            "tools": list(tools),
            "knowledge_bases": list(knowledge),
            "skills": list(skills),
            "storage": {"plugin_storage": apis["storage"], "workspace_storage": False},
        },
        "context": {
            "conversation_id": event.conversation_id,
            "thread_id": event.thread_id,
            "latest_cursor": latest_cursor,
            "has_history_before": latest_cursor is not None,
            "inline_policy": {"mode": "current_event", "delivered_count": 0,
                              "messages_complete": False, "reason": "current_event_only"},
            "available_apis": apis,
        },
        "state": state,
        "runtime": {
            "langbot_version": HOST_NAME,
            "trace_id": run_id,
            "deadline_at": deadline_at,
            "metadata": {"host": HOST_NAME, "project_id": event.project_id,
                         "agent_id": event.agent_id,
                         **({"model_context_window_tokens": grants.context_window}
                            if grants.context_window else {})},
        },
        "variables": {},
        "config": binding.runner_config,
        "adapter": {"extra": {}},
        "metadata": {},
    }
    RunnerContext.model_validate(payload)  # refused here rather than by the runner's SDK
    return payload
