"""A plugin command's run: the message parsed as LangBot parses it, and the command's replies
as the run's results.

LangBot strips the prefix and splits the rest on spaces: `!weather now Paris` runs the
`weather` command with `params` `["weather", "now", "Paris"]`, `crt_command` `weather` and
`crt_params` `["now", "Paris"]`; the plugin's `Command` picks its subcommand (`now`) from
those. Each `CommandReturn` the command yields is one reply of the run: its text, its image
(a link, or the image itself, saved with the conversation's files as a runner's are) and its
file as a link.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass

from runners.protocol import runner_result

# Set in the run's config by the door (`runners.conversations.targets.command_binding`): the
# agent type's prefix, and the sender's privilege as LangBot counts it (2 an administrator, 1
# anyone else).
PREFIX_KEY = "command_prefix"
PRIVILEGE_KEY = "command_privilege"
USER_PRIVILEGE, ADMIN_PRIVILEGE = 1, 2


# LangBot's default prefixes are `!` and its full-width form: a type whose prefix is `!`
# takes both.
FULL_WIDTH = {"!": "！"}


@dataclass(frozen=True)
class Invocation:
    name: str
    params: list[str]
    # The message after its prefix (LangBot's `command_text`).
    text: str


def parse(text: str, prefix: str) -> Invocation | None:
    """The command a message invokes, if it starts with `prefix` (or its full-width form)
    and a name (the message stripped first, as LangBot does)."""
    text = text.strip()
    used = next((candidate for candidate in (prefix, FULL_WIDTH.get(prefix))
                 if candidate and text.startswith(candidate)), None)
    if used is None:
        return None
    params = text[len(used):].split(" ")
    if not params[0]:
        return None
    return Invocation(name=params[0], params=params, text=text[len(used):])


def execute_context(context: dict) -> dict:
    """The SDK's `ExecuteContext` for a command run's context (LangBot's fields)."""
    text = ((context.get("input") or {}).get("text") or "").strip()
    config = context.get("config") or {}
    prefix = config.get(PREFIX_KEY) or ""
    invocation = parse(text, prefix)
    if invocation is None:
        raise ValueError("the run's input does not invoke a command")
    actor = context.get("actor") or {}
    conversation_id = (context.get("conversation") or {}).get("conversation_id")
    return {
        "query_id": 0,
        # LangHost's name for the query: its run (`ctx.reply`, query variables).
        "query_uuid": context["run_id"],
        "session": {"launcher_type": "person",
                    "launcher_id": conversation_id or actor.get("actor_id") or "api",
                    "sender_id": actor.get("actor_id")},
        "command_text": invocation.text,
        "full_command_text": text,
        "command": invocation.name,
        "crt_command": invocation.name,
        "params": invocation.params,
        "crt_params": invocation.params[1:],
        "privilege": config.get(PRIVILEGE_KEY) or USER_PRIVILEGE,
    }


def reply_message(reply: dict) -> dict | None:
    """A `CommandReturn` as one message: its text, its error, its image and file links, and
    an image sent inline as a content element (saved with the conversation's files). None
    when it says nothing."""
    lines = [reply.get("text") or ""]
    if reply.get("error"):
        lines.append(f"Error: {reply['error']}")
    if reply.get("image_url"):
        lines.append(reply["image_url"])
    if reply.get("file_url"):
        lines.append(f"{reply.get('file_name') or 'file'}: {reply['file_url']}")
    text = "\n".join(line for line in lines if line)
    if not reply.get("image_base64"):
        return {"role": "assistant", "content": text} if text else None
    content = [{"type": "text", "text": text}] if text else []
    content.append({"type": "image_base64", "image_base64": reply["image_base64"]})
    return {"role": "assistant", "content": content}


async def as_results(run_id: str, replies: AsyncIterator[dict]) -> AsyncIterator[dict]:
    """The run's results: a message for each reply that says something, then the end."""
    sequence = 0
    async for reply in replies:
        if message := reply_message(reply if isinstance(reply, dict) else {}):
            sequence += 1
            yield runner_result(run_id, sequence, "message.completed",
                                {"message": message, "file_ids": []})
    yield runner_result(run_id, sequence + 1, "run.completed", {"finish_reason": "stop"})
