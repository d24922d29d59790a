"""`builtin:llm-agent`: the agent type's persona answering through its models.

The system prompt is the type's personality prompt with its name, description and expertise;
the conversation's transcript is the history, trimmed (oldest first) to the model's context
window; `model_params` go to the provider as they are. The reply streams as `message.delta`
results, then `message.completed` and `run.completed` with the run's token usage.

In an agent tree the model is offered `transfer_to_agent(agent_name)` with the targets the ADK
rules allow (`transfer_targets`). A call hands the turn to that agent within the same run: it
is recorded as `tool.call.started` / `tool.call.completed` (the orchestrator makes the target
the author of the reply, so the conversation's next message goes to it), and the target answers
with its own persona and models.

The model is also offered the run's granted tools (`resources.tools`: its MCP servers' and
plugin tools). Its calls run through `tool_calls`, recorded as `tool.call.started` /
`tool.call.completed`, and their results (an error too, so the model can recover) go back
as `tool` messages until it answers with text, at most MAX_TOOL_STEPS rounds.

With knowledge bases granted, the model searches them (`knowledge_search.py`: a
`search_knowledge` tool, or a search before each answer) and the reply cites what it was
shown. The conversation's files reach it too (`conversation_files.py`): the user's images as
image parts for a vision model, any file's text through `load_artifact`. With the box
enabled it works in its conversation's workspace (`box_tools.py`), and it activates its
granted skills (`skill_tools.py`).
"""

import functools
import json
import logging
import time
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async

from ledger.models import AgentRun, Transcript, entry_text
from ledger.services.artifacts import ArtifactError
from runners.agent import skill_tools, tool_approval, tool_calls
from runners.agent.conversation_files import (
    LOAD_TOOL,
    MAX_IMAGES,
    VISION,
    ConversationFiles,
)
from runners.agent.knowledge_search import (
    AUTO_CALL_ID,
    SEARCH_TOOL,
    KnowledgeSearch,
    SearchError,
)
from runners.agent.skill_tools import ACTIVATE_TOOL, Skills
from runners.box import tools as box_tools
from runners.catalogue.agent_routing import (
    TRANSFER_TOOL,
    find_agent,
    transfer_targets,
)
from runners.catalogue.bindings import agent_runner_config
from runners.catalogue.trees import build_tree
from runners.models import LLM_AGENT_RUNNER_ID, AgentInstance, AgentType, LLMModel
from runners.providers import tokens
from runners.providers.calls import CallInfo
from runners.providers.errors import ProviderError
from runners.providers.fallback import stream_with_fallback
from runners.providers.lookup import load_models
from runners.providers.messages import parse
from runners.runtime.run_handle import RunHandle
from runners.tools.errors import ToolError

logger = logging.getLogger(__name__)

# A turn hands over at most this many times: a model that keeps transferring is stopped.
MAX_TRANSFERS = 5
# A turn calls tools at most this many rounds: then the run fails rather than loop on.
MAX_TOOL_STEPS = 10
HISTORY_ROWS = 200
# Kept free in the context window for the reply when the params set no max_tokens.
REPLY_RESERVE_TOKENS = 1024


class _Results:
    """Numbers the results of one run in order."""

    def __init__(self, context: dict):
        self.run_id = context["run_id"]
        self.sequence = 0

    def __call__(self, type_: str, data: dict, usage: dict | None = None) -> dict:
        self.sequence += 1
        return {"run_id": self.run_id, "type": type_, "data": data, "usage": usage,
                "sequence": self.sequence, "timestamp": int(time.time())}


def system_prompt(config: dict) -> str:
    parts = [config.get("prompt") or ""]
    identity = f"You are {config['name']}" if config.get("name") else ""
    if identity and config.get("description"):
        identity += f": {config['description']}"
    parts.append(identity)
    expertise = config.get("expertise")
    if isinstance(expertise, list) and expertise:
        parts.append("Your expertise: " + ", ".join(str(item) for item in expertise) + ".")
    return "\n\n".join(part for part in parts if part)


async def _history(conversation_id: str | None, user_text: str,
                   files: ConversationFiles | None, vision: bool) -> list[dict]:
    """The conversation's messages, oldest first (the user's message of this run included);
    for a vision model, the images the user sent as image parts of their messages (the
    newest MAX_IMAGES)."""
    if not conversation_id:
        return [{"role": "user", "content": user_text}]
    rows = [row async for row in Transcript.objects.filter(conversation_id=conversation_id)
            .order_by("-id").values("role", "content", "content_json",
                                    "attachment_refs")[:HISTORY_ROWS]]
    history, images = [], 0
    for row in rows:  # newest first
        text = entry_text(row["content"], row["content_json"])
        message = {"role": row["role"] if row["role"] in ("user", "assistant") else "user",
                   "content": text}
        if vision and files is not None and row["role"] == "user" and images < MAX_IMAGES:
            parts = (await files.image_parts(row["attachment_refs"]))[:MAX_IMAGES - images]
            if parts:
                images += len(parts)
                message["content"] = [{"type": "text", "text": text}, *parts]
        history.append(message)
    return list(reversed(history)) or [{"role": "user", "content": user_text}]


def trimmed(system: list[dict], history: list[dict], window: int, reserve: int) -> list[dict]:
    """System messages and as much recent history as fits the window, the newest kept."""
    budget = window - reserve - tokens.estimate(*parse(system, []))
    kept: list[dict] = []
    for message in reversed(history):
        cost = tokens.estimate(*parse([message], []))
        if kept and cost > budget:
            break
        kept.append(message)
        budget -= cost
    return system + list(reversed(kept))


def transfer_tool(targets: list[dict]) -> dict:
    return {
        "name": TRANSFER_TOOL,
        "description": "Hand the conversation to another agent who is better placed to "
                       "answer. " + " ".join(f"{target['name']}: "
                                              f"{target.get('description') or 'an agent'}."
                                              for target in targets),
        "parameters": {"type": "object", "required": ["agent_name"], "properties": {
            "agent_name": {"type": "string", "enum": [target["name"] for target in targets]}}},
    }


class _Turn:
    """One agent answering: its config, its models and the agents it may hand over to."""

    def __init__(self, config: dict, models: list[LLMModel]):
        self.config = config
        self.models = models
        self.targets = [target for target in config.get("transfer_targets") or []
                        if isinstance(target, dict) and target.get("name")]


async def _turn(config: dict) -> _Turn:
    names = [config.get("model"), *(config.get("fallback_models") or [])]
    names = [name for name in names if isinstance(name, str) and name]
    if not names:
        raise ProviderError(f"model.unknown: agent '{config.get('name')}' names no model; set "
                            "its primary_model")
    models = await load_models(names)
    known = {model.name for model in models}
    missing = [name for name in names if name not in known]
    if missing:
        raise ProviderError(
            f"model.unknown: {', '.join(repr(name) for name in missing)} is not a registered "
            "active model; add it in the admin (LLM models) or with POST /api/v1/models")
    return _Turn(config, models)


async def _handed_over(agent_id: str, name: str) -> _Turn:
    """The turn of the agent `name` of the instance's tree, which the turn was handed to."""
    agent = await AgentInstance.objects.select_related("agent_type").aget(pk=agent_id)
    tree = await sync_to_async(build_tree)(agent.agent_type)
    node = find_agent(tree.root, name)
    config = agent_runner_config(await AgentType.objects.aget(pk=node.type_id))
    config["transfer_targets"] = [{"name": target.name, "description": target.description}
                                  for target in transfer_targets(tree, node)]
    return await _turn(config)


async def _granted_tools(context: dict) -> dict[str, dict]:
    """The run's tool grants by name, as frozen with the run: the context's copy lacks the
    source a call is routed by."""
    if not (context.get("resources") or {}).get("tools"):
        return {}
    run = await AgentRun.objects.filter(run_id=context["run_id"]).afirst()
    auth = await sync_to_async(run.authorization)() if run else {}
    return {tool["tool_name"]: tool for tool in (auth.get("resources") or {}).get("tools") or []}


def tool_definition(tool: dict) -> dict:
    return {"name": tool["tool_name"], "description": tool.get("description") or "",
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}


def _tool_content(answer: dict) -> str:
    """A tool's result as the model reads it: its text (MCP tools put their structured result
    there too), else its JSON."""
    text = answer.get("text")
    return text if isinstance(text, str) and text else json.dumps(answer, ensure_ascii=False,
                                                                  default=str)


async def run(context: dict, handle: RunHandle) -> AsyncIterator[dict]:
    result = _Results(context)
    config = context.get("config") or {}
    runtime = context.get("runtime") or {}
    ids = runtime.get("metadata") or {}
    call = CallInfo(run_id=context["run_id"], agent_id=ids.get("agent_id") or "",
                    project_id=ids.get("project_id") or "", caller=LLM_AGENT_RUNNER_ID,
                    deadline=runtime.get("deadline_at"), journal=handle.journal_model_call)
    conversation_id = (context.get("conversation") or {}).get("conversation_id")
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cached_tokens": 0}
    granted = await _granted_tools(context)
    offered = [tool_definition(tool) for tool in (context.get("resources") or {}).get("tools")
               or [] if tool.get("tool_name") in granted]
    knowledge = await KnowledgeSearch.for_run(context, call)
    if knowledge is not None and not knowledge.automatic and SEARCH_TOOL not in granted:
        offered.append(knowledge.tool())
    files = await ConversationFiles.for_run(context)
    if files is not None and files.names and LOAD_TOOL not in granted:
        offered.append(files.tool())
    workspace = box_tools.workspace_of(context)
    if workspace is not None:
        offered += [tool for tool in box_tools.DEFINITIONS if tool["name"] not in granted]
    skills = await Skills.for_run(context, workspace)
    if skills is not None and ACTIVATE_TOOL not in granted:
        offered.append(skills.tool())

    async def answer_calls(asked: dict[str, dict], refused: set = frozenset()):
        """Run the model's tool calls (those the user refused are answered so), each
        recorded, its answer added to the history the model reads next."""
        for call_id, entry in asked.items():
            name, args = entry["name"], _arguments(entry)
            if name in refused:
                items = _host_call(result, name, call_id, args, _refuse, (ToolRefused,))
            elif name == SEARCH_TOOL and knowledge is not None:
                items = _host_call(result, name, call_id, args, knowledge.answer,
                                   (SearchError,))
            elif name == LOAD_TOOL and files is not None:
                items = _host_call(result, name, call_id, args, files.load, (ArtifactError,))
            elif name in box_tools.NAMES and workspace is not None:
                items = _host_call(result, name, call_id, args,
                                   functools.partial(box_tools.call, workspace, name),
                                   box_tools.FAILURES)
            elif name == ACTIVATE_TOOL and skills is not None:
                items = _host_call(result, name, call_id, args, skills.activate,
                                   skill_tools.FAILURES)
            else:
                items = _tool_call(result, granted, call_id, entry, call.deadline)
            async for item in items:
                if "role" in item:  # the tool message for the model
                    history.append(item)
                else:
                    yield item

    try:
        turn = await _turn(config)
        history = await _history(conversation_id, (context.get("input") or {}).get("text") or "",
                                 files, VISION in (turn.models[0].abilities or []))
        known = len(history)  # the transcript's; what the run adds follows
        found = ""
        if knowledge is not None and knowledge.automatic:
            async for item in _host_call(result, SEARCH_TOOL, AUTO_CALL_ID, {
                    "query": (context.get("input") or {}).get("text") or ""}, knowledge.answer,
                    (SearchError,)):
                if "role" in item:
                    found = f"\n\nFrom the knowledge bases (cite as [n]):\n{item['content']}"
                else:
                    yield item
        handovers = steps = 0
        resumed = tool_approval.answered(context)
        if resumed is not None:  # the user answered: the waiting calls, then the model again
            yield result("state.updated", tool_approval.cleared())
            if resumed["agent"] != turn.config.get("name") and call.agent_id:
                turn = await _handed_over(call.agent_id, resumed["agent"])
            history = [*history, *resumed["messages"]]
            async for item in answer_calls(resumed["calls"], set(resumed["refused"])):
                yield item
        while True:
            text, calls = "", {}
            params = dict(turn.config.get("model_params") or {})
            window = turn.models[0].context_window
            reserve = int(params.get("max_tokens") or REPLY_RESERVE_TOKENS)
            system = system_prompt(turn.config) + found + (skills.instructions() if skills else "")
            messages = trimmed([{"role": "system", "content": system}], history, window,
                               min(reserve, window // 2))
            tools = [*offered, *([transfer_tool(turn.targets)] if turn.targets else [])]
            async for event in stream_with_fallback(turn.models, messages, tools=tools,
                                                    params=params, call=call):
                if "usage" in event:
                    for key in usage:
                        usage[key] += int(event["usage"].get(key) or 0)
                    continue
                chunk = event["chunk"]
                if chunk.get("content"):
                    text += chunk["content"]
                    yield result("message.delta", {"chunk": {"role": "assistant",
                                                              "content": chunk["content"]}})
                for tool_call in chunk.get("tool_calls") or []:
                    entry = calls.setdefault(tool_call["id"], {"name": "", "arguments": ""})
                    function = tool_call.get("function") or {}
                    entry["name"] = function.get("name") or entry["name"]
                    entry["arguments"] += function.get("arguments") or ""
            target = _transfer_target(turn, calls)
            if target is not None and call.agent_id and handovers < MAX_TRANSFERS:
                handovers += 1
                call_id, args = target
                name = args["agent_name"]
                yield result("tool.call.started", {"tool_call_id": call_id,
                                                   "tool_name": TRANSFER_TOOL,
                                                   "parameters": args})
                yield result("tool.call.completed", {"tool_call_id": call_id,
                                                     "tool_name": TRANSFER_TOOL,
                                                     "result": {"agent_name": name}})
                history = [*history,
                           {"role": "assistant", "content": text or None, "tool_calls": [
                               {"id": call_id, "type": "function", "function": {
                                   "name": TRANSFER_TOOL, "arguments": json.dumps(args)}}]},
                           {"role": "tool", "tool_call_id": call_id,
                            "content": f"Transferred to {name}."}]
                turn = await _handed_over(call.agent_id, name)
                continue
            asked = {call_id: entry for call_id, entry in calls.items()
                     if entry["name"] != TRANSFER_TOOL}
            if not asked:
                break
            steps += 1
            if steps > MAX_TOOL_STEPS:
                yield result("run.failed", {
                    "error": f"the model still called tools after {MAX_TOOL_STEPS} steps "
                             "without answering", "code": "tool.steps_exceeded"}, usage)
                return
            history = [*history, {"role": "assistant", "content": text or None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": entry["name"], "arguments": entry["arguments"] or "{}"}}
                for call_id, entry in asked.items()]}]
            waiting = tool_approval.needing_approval(turn.config, asked)
            if waiting and not conversation_id:  # nobody to ask: they do not run
                async for item in answer_calls(asked, set(waiting)):
                    yield item
                continue
            if waiting:  # asked for, the run ends; the answer's run goes on from here
                yield result("action.requested", tool_approval.request(context["run_id"],
                                                                       waiting, asked))
                yield result("state.updated", tool_approval.saved(
                    context["run_id"], turn.config.get("name") or "", history[known:], asked,
                    waiting))
                yield result("run.completed", {"finish_reason": "interaction"}, usage)
                return
            async for item in answer_calls(asked):
                yield item
            if skills is not None and skills.changed:  # kept for the conversation's next run
                skills.changed = False
                yield result("state.updated", skills.state())
        message = {"role": "assistant", "content": text}
        if knowledge is not None and knowledge.citations:
            message["provider_specific_fields"] = {"citations": knowledge.citations}
        yield result("message.completed", {"message": message, "file_ids": []}, usage)
        yield result("run.completed", {"finish_reason": "stop"}, usage)
    except ProviderError as exc:
        code, _, error = str(exc).partition(": ")
        if not code.startswith("model."):
            code, error = "model.unavailable", str(exc)
        yield result("run.failed", {"error": error, "code": code}, usage)


class ToolRefused(Exception):
    pass


async def _refuse(args: dict):
    raise ToolRefused(tool_approval.REFUSED)


def _arguments(entry: dict) -> dict | None:
    try:
        args = json.loads(entry["arguments"] or "{}")
    except ValueError:
        return None
    return args if isinstance(args, dict) else None


async def _host_call(result: _Results, name: str, call_id: str, args: dict | None, act,
                     failures: tuple) -> AsyncIterator[dict]:
    """A tool the host answers itself (knowledge, files, the box): `act(args)` gives the
    recorded result and what the model reads. Recorded as a tool call of the run; a failure
    (one of `failures`) is its answer, for the model to read."""
    yield result("tool.call.started", {"tool_call_id": call_id, "tool_name": name,
                                       "parameters": args or {}})
    recorded = error = None
    try:
        recorded, shown = await act(args or {})
    except failures as exc:
        error = str(exc)
    yield result("tool.call.completed", {"tool_call_id": call_id, "tool_name": name,
                                         "result": recorded, "error": error})
    yield {"role": "tool", "tool_call_id": call_id,
           "content": f"Error: {error}" if error is not None else shown}


async def _tool_call(result: _Results, granted: dict[str, dict], call_id: str, entry: dict,
                     deadline: float | None) -> AsyncIterator[dict]:
    """Run one tool call of the model: its started and completed results, then the `tool`
    message for the model. A failure is the tool's answer, so the model can recover."""
    name = entry["name"]
    args = _arguments(entry)
    yield result("tool.call.started", {"tool_call_id": call_id, "tool_name": name,
                                       "parameters": args or {}})
    answer = error = None
    if name not in granted:
        error = f"tool {name!r} is not available to you"
    elif args is None:
        error = "the arguments are not a JSON object"
    else:
        try:
            answer = await tool_calls.call(granted[name], args, tool_calls.timeout_for(deadline))
        except ToolError as exc:
            error = str(exc)
    yield result("tool.call.completed", {"tool_call_id": call_id, "tool_name": name,
                                         "result": tool_calls.recorded(answer), "error": error})
    yield {"role": "tool", "tool_call_id": call_id,
           "content": f"Error: {error}" if error is not None else _tool_content(answer)}


def _transfer_target(turn: _Turn, calls: dict) -> tuple[str, dict] | None:
    """The model's valid `transfer_to_agent` call, if it made one."""
    allowed = {target["name"] for target in turn.targets}
    for call_id, entry in calls.items():
        if entry["name"] != TRANSFER_TOOL:
            continue
        try:
            args = json.loads(entry["arguments"] or "{}")
        except ValueError:
            args = {}
        if isinstance(args, dict) and args.get("agent_name") in allowed:
            return call_id, args
        logger.warning("transfer_to_agent with a target not offered: %r", entry["arguments"])
    return None
