"""LangBot's query actions, for a command's or an event listener's context: `reply_message`
(`ctx.reply`), `get_bot_uuid` and the query variables (`set_query_var`, `get_query_var`,
`get_query_vars`).

LangHost names each query by its run (`query_uuid` is the run's id). A call is answered for
an active run executing in this process, to the run's own plugin (a command's) or to a
plugin that listens to it; a reply is a message of the run, delivered to its caller; the
variables live as long as the run.
"""

from asgiref.sync import sync_to_async
from langbot_plugin.api.entities.builtin.platform import message as platform_message

from ledger.models import AgentRun, RunStatus
from ledger.selectors import runs as readers
from runners.hostapi import run_api
from runners.runtime.host_actions import HostError
from runners.runtime.host_process import host_process

ACTIONS = frozenset({"reply_message", "get_bot_uuid", "set_query_var", "get_query_var",
                     "get_query_vars"})


def chain_message(chain) -> dict:
    """A LangBot message chain as an assistant message: its text, an image as its link."""
    parts = []
    for component in platform_message.MessageChain.model_validate(chain or []):
        if isinstance(component, platform_message.Plain):
            parts.append(component.text)
        elif isinstance(component, platform_message.Image) and component.url:
            parts.append(component.url)
        else:
            parts.append(str(component))
    return {"role": "assistant", "content": "".join(parts)}


@sync_to_async
def _run_and_owner(run_id: str) -> tuple[AgentRun | None, str | None]:
    """The run, and the plugin it is a run of (none for a built-in runner's)."""
    run = readers.get(run_id)
    return run, (run.authorization().get("plugin_identity") if run else None)


async def handle(action: str, data: dict, context: dict | None) -> dict:
    run_id = data.get("query_uuid")
    if not run_id:
        raise HostError("query.unknown", f"{action}: LangHost names a query by its run "
                                         "(query_uuid); this call names none")
    run, owner = await _run_and_owner(str(run_id))
    handle = host_process().handle(str(run_id))
    if run is None or run.status != RunStatus.RUNNING or handle is None:
        raise HostError("run.not_active", f"{action}: run {run_id} is not running here")
    caller = await run_api.calling_plugin(data, context)
    if not caller or (caller != owner and not handle.heard_by(caller)):
        raise HostError("run.identity_mismatch",
                        f"run {run_id} is neither {caller or 'an unnamed caller'}'s nor "
                        "listened to by it")
    if action == "reply_message":
        if not await handle.reply(chain_message(data.get("message_chain"))):
            raise HostError("run.not_active", f"run {run_id} is no longer streaming")
        return {}
    if action == "get_bot_uuid":
        return {"bot_uuid": str(run.agent_id or "langhost")}
    if action == "set_query_var":
        handle.query_vars[str(data.get("key"))] = data.get("value")
        return {}
    if action == "get_query_var":
        return {"value": handle.query_vars.get(str(data.get("key")))}
    return {"vars": dict(handle.query_vars)}
