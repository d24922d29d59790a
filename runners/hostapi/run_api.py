"""In-run APIs a runner calls back through the runtime (state, history, events, runs,
steering, prompt), each authorized from the database.

Every call names its run. The run's persisted authorization snapshot decides: the run exists,
the caller is the plugin that runs it, the API was granted, the state scope is enabled, and
writes target an active run. Refusals raise `HostError` with a stable code.
"""


from asgiref.sync import sync_to_async

from ledger.models import AgentRun, RunStatus
from ledger.selectors import runs as readers
from ledger.services import state as runner_state
from ledger.services import steering
from runners.models import PluginInstallation
from runners.runtime.host_actions import HostError
from runners.runtime.host_process import host_process

# action -> the available_apis flag that grants it
API_FLAGS = {
    "state_get": "state", "state_set": "state", "state_delete": "state", "state_list": "state",
    "history_page": "history_page", "history_search": "history_search",
    "event_get": "event_get", "event_page": "event_page",
    "run_get": "run_get", "run_list": "run_list", "run_events_page": "run_events_page",
    "run_cancel": "run_cancel", "steering_pull": "steering_pull", "get_prompt": "prompt_get",
    **dict.fromkeys(("get_box_status", "list_boxes", "acquire_box", "bind_box",
                     "import_box_attachments", "export_box_files"), "box"),
}
# What only an active run may do: write, and work in its box.
ACTIVE_RUN_ONLY = {"state_set", "state_delete", "run_cancel", "steering_pull", "get_box_status",
                   "list_boxes", "acquire_box", "bind_box", "import_box_attachments",
                   "export_box_files"}
STATE_KEY_ALIASES = {"conversation_id": "external.conversation_id"}


def _plugin_of_installation(installation_uuid: str) -> str | None:
    installation = PluginInstallation.objects.filter(installation_uuid=installation_uuid).first()
    return installation.plugin_id if installation else None


@sync_to_async
def _load(run_id: str, installation_uuid: str | None) -> tuple[AgentRun | None, dict,
                                                                str | None]:
    """The run, its authorization snapshot, and the plugin of the installation."""
    run = readers.get(run_id)
    plugin = _plugin_of_installation(installation_uuid) if installation_uuid else None
    return run, run.authorization() if run else {}, plugin


def _callers(data: dict, context: dict | None, context_plugin: str | None) -> list[str | None]:
    """Every name a call comes with: the runtime's `caller_plugin_identity` (the SDK names
    the caller for the run API; LangHost's own runtime for every action) and the plugin of the
    installation its action context names (any SDK runtime sends it, an operator's `lbp rt`
    too). None for an installation LangHost does not know."""
    named = [data["caller_plugin_identity"]] if data.get("caller_plugin_identity") else []
    return named + ([context_plugin] if (context or {}).get("installation_uuid") else [])


async def calling_plugin(data: dict, context: dict | None) -> str | None:
    """The plugin that makes a call outside a run, when every name it comes with agrees."""
    installation_uuid = (context or {}).get("installation_uuid")
    bound = (await sync_to_async(_plugin_of_installation)(installation_uuid)
             if installation_uuid else None)
    names = _callers(data, context, bound)
    return names[0] if names and names[0] and all(name == names[0] for name in names) else None


async def authorize(action: str, data: dict, context: dict | None) -> tuple[AgentRun, dict]:
    run_id = data.get("run_id")
    if not run_id:
        raise HostError("run.required", f"{action} must name the run it belongs to")
    installation_uuid = (context or {}).get("installation_uuid")
    run, auth, context_plugin = await _load(str(run_id), installation_uuid)
    if run is None:
        raise HostError("run.not_found", f"run {run_id} does not exist")
    owner = auth.get("plugin_identity")
    # The caller must be named, and be the run's plugin by every name it comes with: an unnamed
    # caller, or an installation LangHost does not know, is refused rather than trusted.
    for claimed in _callers(data, context, context_plugin) or [None]:
        if not claimed or claimed != owner:
            who = claimed or "an unnamed or unknown caller"
            raise HostError("run.identity_mismatch", f"run {run_id} does not belong to {who}")
    flag = API_FLAGS.get(action)  # none for model calls: the run's model grants decide them
    if flag and not (auth.get("available_apis") or {}).get(flag):
        raise HostError("api.not_available", f"{action} is not available for this run")
    if action in ACTIVE_RUN_ONLY and run.status != RunStatus.RUNNING:
        raise HostError("run.not_active", f"run {run_id} is {run.status}; {action} needs an active run")
    return run, auth


def _scope_key(auth: dict, scope) -> str:
    info = (auth.get("state_context") or {}).get(scope)
    if info is None:
        raise HostError("state.scope_not_enabled", f"state scope {scope!r} is not enabled for this run")
    return info["scope_key"]


def _state_key(data: dict) -> str:
    key = data.get("key")
    if not isinstance(key, str) or not key:
        raise HostError("state.key_required", "a non-empty state key is required")
    return STATE_KEY_ALIASES.get(key, key)


async def _state(action: str, data: dict, auth: dict) -> dict:
    scope = data.get("scope")
    scope_key = _scope_key(auth, scope)
    if action == "state_list":
        prefix = STATE_KEY_ALIASES.get(data.get("prefix") or "", data.get("prefix") or "")
        keys, has_more = await runner_state.state_list(scope_key, prefix, data.get("limit") or 100)
        return {"keys": keys, "has_more": has_more}
    key = _state_key(data)
    if action == "state_get":
        return {"value": await runner_state.state_get(scope_key, key)}
    if action == "state_delete":
        return {"success": await runner_state.state_delete(scope_key, key)}
    value = data.get("value")
    try:
        size = runner_state.value_size(value)
    except (TypeError, ValueError) as exc:
        raise HostError("state.not_json", "state value must be JSON") from exc
    if size > runner_state.STATE_VALUE_MAX_BYTES:
        raise HostError("state.too_large", f"state value is {size} bytes; the limit is "
                                           f"{runner_state.STATE_VALUE_LIMIT}")
    identity = auth["state_context"][scope]["identity"]
    await runner_state.state_set(runner_state.StateWrite(scope=scope, scope_key=scope_key, state_key=key,
                                             value=value, identity=identity))
    # The run's timeline shows the write, as it shows a `state.updated` result.
    handle = host_process().handle(data["run_id"])
    if handle is not None:
        await handle.record("state.updated", {"scope": scope, "key": key, "value": value})
    return {"success": True}


@sync_to_async
def _target_run(run: AgentRun, target_run_id) -> AgentRun:
    """The caller's run, or another run of the same runner in the same conversation."""
    if not target_run_id or target_run_id == run.run_id:
        return run
    target = readers.get(target_run_id)
    if (target is None or target.runner_id != run.runner_id or not run.conversation_id
            or target.conversation_id != run.conversation_id or target.thread_id != run.thread_id):
        raise HostError("run.not_found", f"run {target_run_id} is not visible to this run")
    return target


def _own_conversation(run: AgentRun, requested) -> None:
    if not run.conversation_id:
        raise HostError("conversation.required", "this run has no conversation")
    if requested and requested != run.conversation_id:
        raise HostError("conversation.forbidden", "only the run's own conversation is readable")


@sync_to_async
def _event_get(run: AgentRun, event_id) -> dict:
    entry = readers.event_record(event_id)
    visible = entry is not None and (
        entry.event_id == run.event_id
        or (run.conversation_id and entry.conversation_id == run.conversation_id
            and entry.thread_id == run.thread_id)
    )
    if not visible:
        raise HostError("event.not_found", f"event {event_id} is not visible to this run")
    return readers.sdk_event_record(entry)


async def handle(action: str, data: dict, context: dict | None) -> dict:
    """Answer one in-run API call, or raise HostError."""
    if action not in API_FLAGS:
        raise HostError("host.unsupported", f"{action} is not supported by LangHost")
    run, auth = await authorize(action, data, context)
    if action.startswith("state_"):
        return await _state(action, data, auth)
    if action == "run_get":
        return readers.sdk_run(await _target_run(run, data.get("target_run_id")))
    if action == "run_events_page":
        target = await _target_run(run, data.get("target_run_id"))
        return await sync_to_async(readers.run_events_page_sync)(
            target.run_id, before_cursor=data.get("before_cursor"),
            after_cursor=data.get("after_cursor"), limit=data.get("limit"),
            direction=data.get("direction") or "forward")
    if action == "run_cancel":
        target = await _target_run(run, data.get("target_run_id"))
        await host_process().cancel(target.run_id, data.get("reason") or "cancelled by the runner")
        return readers.sdk_run(await readers.aget(target.run_id))
    if action == "run_list":
        _own_conversation(run, data.get("conversation_id"))
        return await sync_to_async(readers.run_list_sync)(
            runner_id=run.runner_id, conversation_id=run.conversation_id,
            thread_id=run.thread_id, statuses=data.get("statuses"),
            before_cursor=data.get("before_cursor"), limit=data.get("limit"))
    if action == "history_page":
        _own_conversation(run, data.get("conversation_id"))
        return await sync_to_async(readers.history_page_sync)(
            run.conversation_id, run.thread_id, before_cursor=data.get("before_cursor"),
            after_cursor=data.get("after_cursor"), limit=data.get("limit"),
            direction=data.get("direction") or "backward",
            include_attachments=bool(data.get("include_attachments")))
    if action == "history_search":
        _own_conversation(run, (data.get("filters") or {}).get("conversation_id"))
        return await sync_to_async(readers.history_search_sync)(
            run.conversation_id, run.thread_id, data.get("query") or "", data.get("top_k"))
    if action == "event_get":
        return await _event_get(run, data.get("event_id"))
    if action == "event_page":
        _own_conversation(run, data.get("conversation_id"))
        return await sync_to_async(readers.event_page_sync)(
            run.conversation_id, run.thread_id, event_types=data.get("event_types"),
            before_cursor=data.get("before_cursor"), limit=data.get("limit"))
    if action == "steering_pull":
        mode = (data.get("mode") or "all").replace("-", "_")
        limit = 1 if mode in {"one", "one_at_a_time"} else data.get("limit")
        return {"items": await steering.pull_steering(run.run_id, limit)}
    # get_prompt: the prompt the binding carries: a prompt-editor list as it is, a persona
    # as a system message.
    prompt = auth.get("prompt") or ""
    if isinstance(prompt, list):
        return {"prompt": prompt}
    return {"prompt": [{"role": "system", "content": prompt}] if prompt else []}
