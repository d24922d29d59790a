"""What the built-in agent's model reads: the system prompt made of the agent type's persona,
and the conversation's messages, trimmed (oldest first) to the model's context window."""

from ledger.models import entry_text
from ledger.selectors import conversations as conversation_selectors
from runners.agent.conversation_files import MAX_IMAGES, ConversationFiles
from runners.providers import tokens
from runners.providers.messages import parse

HISTORY_ROWS = 200


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


async def conversation_history(conversation_id: str | None, user_text: str,
                   files: ConversationFiles | None, vision: bool) -> list[dict]:
    """The conversation's messages, oldest first (the user's message of this run included);
    for a vision model, the images the user sent as image parts of their messages (the
    newest MAX_IMAGES)."""
    if not conversation_id:
        return [{"role": "user", "content": user_text}]
    rows = await conversation_selectors.latest_rows(conversation_id, HISTORY_ROWS)
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
