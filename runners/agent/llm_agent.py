"""`builtin:llm-agent`: the agent type's persona answering through its models.

The system prompt is the type's personality prompt with its name, description and expertise;
the conversation's transcript is the history, trimmed (oldest first) to the model's context
window; plugins that listen to the run's events may change both first (LangBot's
`PromptPreProcessing`); `model_params` go to the provider as they are. The reply streams as
`message.delta` results, then `message.completed` and `run.completed` with the run's token
usage.

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
enabled it works in its conversation's workspace (`runners/box/tools.py`), and it activates its
granted skills (`skill_tools.py`).
"""

import functools
import json
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async

from ledger.selectors import runs as run_selectors
from ledger.services.artifacts import ArtifactError
from runners.agent import agent_tools, skill_tools, tool_approval, tool_calls
from runners.agent.conversation_files import (
    LOAD_TOOL,
    VISION,
    ConversationFiles,
)
from runners.agent.knowledge_search import (
    AUTO_CALL_ID,
    SEARCH_TOOL,
    KnowledgeSearch,
    SearchError,
)
from runners.agent.prompt import conversation_history, system_prompt, trimmed
from runners.agent.skill_tools import Skills
from runners.agent.turns import (
    Turn,
    handed_over,
    transfer_target,
    transfer_tool,
    turn_for,
    unknown_transfer,
)
from runners.agent.workflow import EXIT_LOOP, EXIT_LOOP_TOOL
from runners.box import tools as box_tools
from runners.catalogue import output_schema
from runners.catalogue.agent_routing import (
    TRANSFER_TOOL,
)
from runners.grants.tools import ACTIVATE_SKILL
from runners.models import LLM_AGENT_RUNNER_ID
from runners.protocol import runner_result
from runners.providers.calls import CallInfo
from runners.providers.errors import ProviderError
from runners.providers.fallback import stream_with_fallback
from runners.runtime.run_handle import RunHandle
from runners.tools.errors import ToolError

# A turn hands over at most this many times: a model that keeps transferring is stopped.
MAX_TRANSFERS = 5
# A turn calls tools at most this many rounds: then the run fails rather than loop on.
MAX_TOOL_STEPS = 10
# Kept free in the context window for the reply when the params set no max_tokens.
REPLY_RESERVE_TOKENS = 1024


class _Results:
    """Numbers the results of one run in order."""

    def __init__(self, context: dict):
        self.run_id = context["run_id"]
        self.sequence = 0

    def __call__(self, type_: str, data: dict, usage: dict | None = None) -> dict:
        self.sequence += 1
        return runner_result(self.run_id, self.sequence, type_, data, usage)


async def _granted_tools(context: dict) -> dict[str, dict]:
    """The run's tool grants by name, as frozen with the run: the context's copy lacks the
    source a call is routed by."""
    if not (context.get("resources") or {}).get("tools"):
        return {}
    run = await run_selectors.aget(context["run_id"])
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


class _AgentRun:
    """One run of the built-in agent: the tools it offers, the history the model reads, the
    agent of the tree whose turn it is, and the usage so far."""

    def __init__(self, context: dict, handle: RunHandle):
        self.context = context
        self.result = _Results(context)
        runtime = context.get("runtime") or {}
        ids = runtime.get("metadata") or {}
        self.call = CallInfo(run_id=context["run_id"], agent_id=ids.get("agent_id") or "",
                             project_id=ids.get("project_id") or "",
                             caller=LLM_AGENT_RUNNER_ID, deadline=runtime.get("deadline_at"),
                             journal=handle.journal_model_call)
        self.handle = handle
        self.conversation_id = (context.get("conversation") or {}).get("conversation_id")
        self.user_text = (context.get("input") or {}).get("text") or ""
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                      "cached_tokens": 0}
        self.history: list[dict] = []
        self.known = 0  # how many of `history`'s messages are the transcript's
        self.found = ""  # what an automatic knowledge search found, for the system prompt
        self.turn: Turn | None = None
        # The system messages of the agent whose prompt the run's event listeners changed.
        self.listened_system: list[dict] | None = None
        # The reply parsed, when the agent type has an output schema.
        self.structured = None
        self.prompted: Turn | None = None

    async def offer_tools(self) -> None:
        """The granted tools, and the host's own the run may use (its knowledge, the
        conversation's files, the box, skills) unless a granted tool of that name stands."""
        context = self.context
        self.granted = await _granted_tools(context)
        self.offered = [tool_definition(tool) for tool in
                        (context.get("resources") or {}).get("tools") or []
                        if tool.get("tool_name") in self.granted]
        self.knowledge = await KnowledgeSearch.for_run(context, self.call)
        if (self.knowledge is not None and not self.knowledge.automatic
                and SEARCH_TOOL not in self.granted):
            self.offered.append(self.knowledge.tool())
        self.files = await ConversationFiles.for_run(context)
        if self.files is not None and self.files.names and LOAD_TOOL not in self.granted:
            self.offered.append(self.files.tool())
        self.workspace = box_tools.workspace_of(context)
        if self.workspace is not None:
            self.offered += [tool for tool in box_tools.DEFINITIONS
                             if tool["name"] not in self.granted]
        self.skills = await Skills.for_run(context, self.workspace)
        if self.skills is not None and ACTIVATE_SKILL not in self.granted:
            self.offered.append(self.skills.tool())
        self.agent_tools = {tool["tool_name"]: tool for tool in
                            (context.get("config") or {}).get("agent_tools") or []
                            if tool["tool_name"] not in self.granted}
        self.offered += [agent_tools.definition(tool) for tool in self.agent_tools.values()]
        # A loop workflow's step may end the loop.
        self.exits_loop = bool((context.get("config") or {}).get(EXIT_LOOP))
        self.escalated = False
        if self.exits_loop:
            self.offered.append(EXIT_LOOP_TOOL)

    def _answering(self, name: str, call_id: str, entry: dict, refused: set):
        args, result = _arguments(entry), self.result
        if name in refused:
            return _host_call(result, name, call_id, args, _refuse, (ToolRefused,))
        if name == SEARCH_TOOL and self.knowledge is not None:
            return _host_call(result, name, call_id, args, self.knowledge.answer, (SearchError,))
        if name == LOAD_TOOL and self.files is not None:
            return _host_call(result, name, call_id, args, self.files.load, (ArtifactError,))
        if name in box_tools.NAMES and self.workspace is not None:
            return _host_call(result, name, call_id, args,
                              functools.partial(box_tools.call, self.workspace, name),
                              box_tools.FAILURES)
        if name in self.agent_tools:
            return _host_call(result, name, call_id, args, functools.partial(
                agent_tools.ask, self.handle, self.agent_tools[name]),
                (agent_tools.AgentToolError,))
        if name == ACTIVATE_SKILL and self.skills is not None:
            return _host_call(result, name, call_id, args, self.skills.activate,
                              skill_tools.FAILURES)
        return _tool_call(result, self.granted, call_id, entry, self.call.deadline)

    async def answer_calls(self, asked: dict[str, dict], refused: set = frozenset()):
        """Run the model's tool calls (those the user refused are answered so), each
        recorded, its answer added to the history the model reads next."""
        for call_id, entry in asked.items():
            async for item in self._answering(entry["name"], call_id, entry, refused):
                if "role" in item:  # the tool message for the model
                    self.history.append(item)
                else:
                    yield item

    async def begin(self):
        """The agent whose turn it is, the conversation so far, what an automatic knowledge
        search finds, and the calls a user's answer to a question lets go on."""
        self.turn = await turn_for(self.context.get("config") or {})
        self.history = await conversation_history(self.conversation_id, self.user_text, self.files,
                                      VISION in (self.turn.models[0].abilities or []))
        persona = [{"role": "system", "content": system_prompt(self.turn.config)}]
        system, self.history = await self.handle.prompt(persona, self.history)
        if system != persona:
            self.listened_system, self.prompted = system, self.turn
        self.known = len(self.history)
        if self.knowledge is not None and self.knowledge.automatic:
            async for item in _host_call(self.result, SEARCH_TOOL, AUTO_CALL_ID,
                                         {"query": self.user_text}, self.knowledge.answer,
                                         (SearchError,)):
                if "role" in item:
                    self.found = ("\n\nFrom the knowledge bases (cite as [n]):\n"
                                  f"{item['content']}")
                else:
                    yield item
        resumed = tool_approval.answered(self.context)
        if resumed is not None:  # the user answered: the waiting calls, then the model again
            yield self.result("state.updated", tool_approval.cleared())
            if resumed["agent"] != self.turn.config.get("name") and self.call.agent_id:
                self.turn = await handed_over(self.call.agent_id, resumed["agent"])
            self.history = [*self.history, *resumed["messages"]]
            async for item in self.answer_calls(resumed["calls"], set(resumed["refused"])):
                yield item

    async def ask_model(self):
        """Stream the model's answer to the history: its text as deltas; `self.text` and
        `self.calls` (by call id) once it ended."""
        turn = self.turn
        self.text, self.calls = "", {}
        params = dict(turn.config.get("model_params") or {})
        window = turn.models[0].context_window
        reserve = int(params.get("max_tokens") or REPLY_RESERVE_TOKENS)
        extra = self.found + (self.skills.instructions() if self.skills else "")
        if schema := turn.config.get("output_schema"):
            extra += output_schema.instructions(schema)
            if all(model.provider.kind == output_schema.OPENAI and
                   output_schema.JSON_SCHEMA_ABILITY in (model.abilities or [])
                   for model in turn.models):
                params["response_format"] = output_schema.response_format(schema)
        if self.listened_system is not None and turn is self.prompted:
            system = [*self.listened_system,
                      *([{"role": "system", "content": extra.strip()}] if extra else [])]
        else:
            system = [{"role": "system", "content": system_prompt(turn.config) + extra}]
        messages = trimmed(system, self.history, window, min(reserve, window // 2))
        tools = [*self.offered, *([transfer_tool(turn.targets)] if turn.targets else [])]
        async for event in stream_with_fallback(turn.models, messages, tools=tools,
                                                params=params, call=self.call):
            if "usage" in event:
                for key in self.usage:
                    self.usage[key] += int(event["usage"].get(key) or 0)
                continue
            chunk = event["chunk"]
            if chunk.get("content"):
                self.text += chunk["content"]
                yield self.result("message.delta", {"chunk": {"role": "assistant",
                                                               "content": chunk["content"]}})
            for tool_call in chunk.get("tool_calls") or []:
                entry = self.calls.setdefault(tool_call["id"], {"name": "", "arguments": ""})
                function = tool_call.get("function") or {}
                entry["name"] = function.get("name") or entry["name"]
                entry["arguments"] += function.get("arguments") or ""

    async def hand_over(self, call_id: str, args: dict):
        """`transfer_to_agent`: recorded as a tool call, and the named agent answers next."""
        name = args["agent_name"]
        yield self.result("tool.call.started", {"tool_call_id": call_id,
                                                "tool_name": TRANSFER_TOOL, "parameters": args})
        yield self.result("tool.call.completed", {"tool_call_id": call_id,
                                                  "tool_name": TRANSFER_TOOL,
                                                  "result": {"agent_name": name}})
        self.history = [*self.history,
                        {"role": "assistant", "content": self.text or None, "tool_calls": [
                            {"id": call_id, "type": "function", "function": {
                                "name": TRANSFER_TOOL, "arguments": json.dumps(args)}}]},
                        {"role": "tool", "tool_call_id": call_id,
                         "content": f"Transferred to {name}."}]
        self.turn = await handed_over(self.call.agent_id, name)

    async def ask_approval(self, asked: dict, waiting: list):
        """The calls the user must approve: asked for, the run ends; the answer's run goes
        on from here."""
        run_id = self.context["run_id"]
        yield self.result("action.requested", tool_approval.request(run_id, waiting, asked))
        yield self.result("state.updated", tool_approval.saved(
            run_id, self.turn.config.get("name") or "", self.history[self.known:], asked,
            waiting))
        yield self.result("run.completed", {"finish_reason": "interaction"}, self.usage)

    async def steps(self):
        """The model, then its tool calls, until it answers; `self.ended` when the run ended
        here (a question asked, too many steps)."""
        handovers = steps = 0
        self.ended = False
        while True:
            async for item in self.ask_model():
                yield item
            target = transfer_target(self.turn, self.calls)
            if target is not None and self.call.agent_id and handovers < MAX_TRANSFERS:
                handovers += 1
                async for item in self.hand_over(*target):
                    yield item
                continue
            if target is None and (why := unknown_transfer(self.turn, self.calls)):
                self.ended = True
                yield self.result("run.failed", {"code": "transfer.unknown_agent",
                                                 "error": why}, self.usage)
                return
            asked = {call_id: entry for call_id, entry in self.calls.items()
                     if entry["name"] != TRANSFER_TOOL}
            exiting = [call_id for call_id, entry in asked.items() if entry["name"] == EXIT_LOOP]
            if exiting and self.exits_loop:
                for item in self.exit_loop(exiting[0]):
                    yield item
                return
            if not asked:
                return
            steps += 1
            if steps > MAX_TOOL_STEPS:
                self.ended = True
                yield self.result("run.failed", {
                    "error": f"the model still called tools after {MAX_TOOL_STEPS} steps "
                             "without answering", "code": "tool.steps_exceeded"}, self.usage)
                return
            self.history = [*self.history, {
                "role": "assistant", "content": self.text or None, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {
                        "name": entry["name"], "arguments": entry["arguments"] or "{}"}}
                    for call_id, entry in asked.items()]}]
            waiting = tool_approval.needing_approval(self.turn.config, asked)
            if waiting and self.conversation_id:
                self.ended = True
                async for item in self.ask_approval(asked, waiting):
                    yield item
                return
            # Nobody to ask without a conversation: the calls needing approval do not run.
            async for item in self.answer_calls(asked, set(waiting)):
                yield item
            if waiting:
                continue
            if self.skills is not None and self.skills.changed:  # kept for its next run
                self.skills.changed = False
                yield self.result("state.updated", self.skills.state())

    def exit_loop(self, call_id: str):
        """`exit_loop`: recorded as a tool call; the run ends with the model's text, saying
        the loop it is a step of is over."""
        self.escalated = True
        yield self.result("tool.call.started", {"tool_call_id": call_id, "tool_name": EXIT_LOOP,
                                                "parameters": {}})
        yield self.result("tool.call.completed", {"tool_call_id": call_id,
                                                  "tool_name": EXIT_LOOP, "result": {}})

    async def checked_output(self):
        """With an output schema, the reply parsed and checked (`self.structured`): asked once
        more on a mismatch, saying what was wrong; the run fails `output.invalid` after."""
        schema = self.turn.config.get("output_schema")
        for attempt in (1, 2):
            self.structured, problem = output_schema.parsed(self.text, schema)
            if problem is None:
                return
            if attempt == 2:
                self.ended = True
                yield self.result("run.failed", {"code": "output.invalid", "error": (
                    f"the reply does not match the output schema: {problem}")}, self.usage)
                return
            self.history = [*self.history, {"role": "assistant", "content": self.text},
                            {"role": "user", "content": (
                                f"That answer does not match the output schema: {problem}. "
                                "Answer again with only JSON that matches it.")}]
            async for item in self.steps():
                yield item
            if self.ended:
                return

    def reply(self):
        message = {"role": "assistant", "content": self.text}
        fields = {}
        if self.knowledge is not None and self.knowledge.citations:
            fields["citations"] = self.knowledge.citations
        if self.structured is not None:
            fields["structured_output"] = self.structured
        if fields:
            message["provider_specific_fields"] = fields
        yield self.result("message.completed", {"message": message, "file_ids": []},
                          self.usage)
        yield self.result("run.completed",
                          {"finish_reason": EXIT_LOOP if self.escalated else "stop"}, self.usage)


async def run(context: dict, handle: RunHandle) -> AsyncIterator[dict]:
    agent = _AgentRun(context, handle)
    await agent.offer_tools()
    try:
        async for item in agent.begin():
            yield item
        async for item in agent.steps():
            yield item
        if not agent.ended and agent.turn.config.get("output_schema"):
            async for item in agent.checked_output():
                yield item
        if not agent.ended:
            for item in agent.reply():
                yield item
    except ProviderError as exc:
        code, _, error = str(exc).partition(": ")
        if not code.startswith("model."):
            code, error = "model.unavailable", str(exc)
        yield agent.result("run.failed", {"error": error, "code": code}, agent.usage)


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
