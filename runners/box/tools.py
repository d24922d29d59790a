"""The built-in LLM agent's tools in its conversation's sandbox box, when its agent type
enables the box: `exec` (a shell command in the workspace), `read_file`, `write_file`,
`list_files`. Each call is a tool call of the run; what goes wrong (a path out of the
workspace, a command past its time, a box server that died) is the tool's answer, for the
model to read, not the run's end.
"""

import base64
import json

from asgiref.sync import sync_to_async

from runners.box import services
from runners.box.server import BoxUnavailable

EXEC, READ, WRITE, LIST = "exec", "read_file", "write_file", "list_files"
NAMES = (EXEC, READ, WRITE, LIST)
_PATH = {"type": "string", "description": "A path in the workspace (/workspace/...)."}
DEFINITIONS = [
    {"name": EXEC, "description": "Run a shell command in your workspace (/workspace, the "
                                  "working directory) and get its exit code and output.",
     "parameters": {"type": "object", "required": ["command"], "properties": {
         "command": {"type": "string"},
         "timeout": {"type": "integer", "minimum": 1, "description": "Seconds, at most the "
                                                                    "box's limit."}}}},
    {"name": READ, "description": "Read a file of your workspace (text as it is, anything "
                                  "else as base64).",
     "parameters": {"type": "object", "required": ["path"], "properties": {"path": _PATH}}},
    {"name": WRITE, "description": "Write a text file in your workspace (made or replaced).",
     "parameters": {"type": "object", "required": ["path", "content"], "properties": {
         "path": _PATH, "content": {"type": "string"}}}},
    {"name": LIST, "description": "List the files of your workspace (or of a directory in it).",
     "parameters": {"type": "object", "properties": {"path": _PATH}}},
]


def workspace_of(context: dict) -> services.Workspace | None:
    """The run's workspace when its config enables the box and it has a conversation."""
    conversation_id = (context.get("conversation") or {}).get("conversation_id")
    if not (context.get("config") or {}).get("box") or not conversation_id:
        return None
    project_id = ((context.get("runtime") or {}).get("metadata") or {}).get("project_id") or ""
    return services.Workspace(project_id=project_id, conversation_id=conversation_id,
                              network=bool(context["config"].get("box_network")))


async def call(workspace: services.Workspace, name: str, args: dict) -> tuple[dict, str]:
    """`(recorded result, what the model reads)`; raises BoxError / BoxUnavailable with what
    to tell the model."""
    if name == EXEC:
        done = await services.execute(workspace, args.get("command"), _timeout(args))
        shown = json.dumps(done.as_dict())
        if done.timed_out:
            shown = f"The command was cut off: it ran past its time limit. {shown}"
        return done.as_dict(), shown
    if name == READ:
        data = await sync_to_async(services.read_file)(workspace, args.get("path"))
        try:
            return {"path": args.get("path"), "size": len(data)}, data.decode()
        except UnicodeDecodeError:  # not text: whole, as base64
            encoded = base64.b64encode(data).decode()
            return ({"path": args.get("path"), "size": len(data), "content_base64": encoded},
                    f"(binary, {len(data)} bytes, base64) {encoded}")
    if name == WRITE:
        content = args.get("content")
        if not isinstance(content, str):
            raise services.BoxError("write_file needs `content`, a string")
        path = await sync_to_async(services.write_file)(workspace, args.get("path"),
                                                        content.encode())
        return {"path": args.get("path"), "size": path.stat().st_size}, "Written."
    listed = await sync_to_async(services.list_files)(workspace, args.get("path") or "/workspace")
    return {"files": listed}, json.dumps(listed)


def _timeout(args: dict) -> int | None:
    timeout = args.get("timeout")
    return timeout if isinstance(timeout, int) and timeout > 0 else None


FAILURES = (services.BoxError, BoxUnavailable)
