"""The events LangBot tells a plugin's `EventListener` of, built for a LangHost run as LangBot
builds them (the SDK's models), and what a listener may change in them, read back.

A LangHost conversation is LangBot's private chat: the launcher is the conversation, the
sender the run's actor. Three events have a LangHost meaning:

- `PersonNormalMessageReceived`, before the runner: a listener may rewrite the message the
  runner gets (`user_message_alter`) or answer in its place (`prevent_default()` with a
  `reply_message_chain`).
- `PromptPreProcessing`, before the built-in agent first asks its model: a listener may change
  the system prompt (`default_prompt`) and the conversation so far (`prompt`).
- `NormalMessageResponded`, for each reply before it is delivered: with `prevent_default()` a
  listener replaces it by its `reply_message_chain`, or withholds it without one.
"""

import time

from asgiref.sync import sync_to_async
from langbot_plugin.api.definition.components.common.event_listener import EventListener
from langbot_plugin.api.entities import context as sdk_context
from langbot_plugin.api.entities import events as sdk_events
from langbot_plugin.api.entities.builtin.platform import entities as platform_entities
from langbot_plugin.api.entities.builtin.platform import events as platform_events
from langbot_plugin.api.entities.builtin.platform import message as platform_message
from langbot_plugin.api.entities.builtin.provider import message as provider_message
from langbot_plugin.api.entities.builtin.provider import session as provider_session
from pydantic import ValidationError

from ledger.models import message_text
from runners.hostapi.query_api import chain_message
from runners.models import PluginInstallation

# Asked for every run: kept as the registry keeps descriptors (a discovery or a plugin's new
# settings in this process forget it; other processes' changes show within the TTL).
CACHE_SECONDS = 2.0
_listening: tuple[float, list[str]] | None = None
# Bumped by every forget: a read that began before one does not store what it read.
_generation = 0


def forget_listening_plugins() -> None:
    global _listening, _generation
    _listening, _generation = None, _generation + 1


def _read_listening_sync(generation: int) -> tuple[float, list[str]]:
    global _listening
    read = (time.monotonic() + CACHE_SECONDS, [
        installation.plugin_id for installation in PluginInstallation.objects.filter(
            enabled=True, listens_to_events=True).order_by("-priority", "author", "name")])
    if generation == _generation:
        _listening = read
    return read


async def listening_plugins(named: list[str] | None) -> list[str]:
    """The enabled plugins with an event listener that hear an agent's events, in the order
    they are told: those `named` (an agent type's `event_plugins`) in that order, or, when it
    names none, all of them, the highest priority first."""
    cached = _listening
    if cached is None or cached[0] <= time.monotonic():  # a thread only when it is stale
        cached = await sync_to_async(_read_listening_sync)(_generation)
    listening = cached[1]
    return list(listening) if named is None else [name for name in named if name in listening]


def has_listener(plugin: dict) -> bool:
    """Whether a plugin the runtime lists (`list_plugins`) has an `EventListener`."""
    return any(((component.get("manifest") or {}).get("manifest") or {}).get("kind")
               == EventListener.__kind__ for component in plugin.get("components") or [])


def _session(context: dict) -> dict:
    actor = context.get("actor") or {}
    conversation = context.get("conversation") or {}
    sender = str(actor.get("actor_id") or "langhost")
    return {"launcher_type": "person",
            "launcher_id": str(conversation.get("conversation_id") or sender),
            "sender_id": sender}


def _text_chain(text: str) -> platform_message.MessageChain:
    return platform_message.MessageChain([platform_message.Plain(text=text)])


def _dump(event: sdk_events.BaseEventModel, run_id: str) -> dict:
    event.query_uuid = run_id
    return sdk_context.EventContext(event_name=event.event_name, event=event,
                                    query_uuid=run_id).model_dump()


def message_received(context: dict) -> dict:
    """The event context of the run's message, as LangBot's `PersonNormalMessageReceived`."""
    session = _session(context)
    text = (context.get("input") or {}).get("text") or ""
    chain = _text_chain(text)
    sender = platform_entities.Friend(id=session["sender_id"], nickname=session["sender_id"],
                                      remark="")
    return _dump(sdk_events.PersonNormalMessageReceived(
        **session, text_message=text, message_chain=chain,
        message_event=platform_events.FriendMessage(sender=sender, message_chain=chain)),
        context["run_id"])


def _messages(messages: list[dict]) -> list[provider_message.Message]:
    """LangHost's messages as the SDK's; a message its model cannot hold goes as its text."""
    converted = []
    for message in messages:
        try:
            converted.append(provider_message.Message.model_validate(message))
        except ValidationError:
            converted.append(provider_message.Message(
                role=message.get("role") or "user",
                content=message_text(message.get("content"))))
    return converted


def prompt_preprocessing(context: dict, system: list[dict], history: list[dict]) -> dict:
    """The event context of the built-in agent's prompt: its system messages and the
    conversation so far (the current message last)."""
    session = _session(context)
    return _dump(sdk_events.PromptPreProcessing(
        session_name=f"{session['launcher_type']}_{session['launcher_id']}",
        default_prompt=_messages(system), prompt=_messages(history)), context["run_id"])


def message_responded(context: dict, text: str, funcs_called: list[str]) -> dict:
    """The event context of one reply of the run, as LangBot's `NormalMessageResponded`."""
    session = _session(context)
    return _dump(sdk_events.NormalMessageResponded(
        **session, session=provider_session.Session(
            launcher_type=provider_session.LauncherTypes.PERSON,
            launcher_id=session["launcher_id"], sender_id=session["sender_id"]),
        prefix="", response_text=text, finish_reason="stop", funcs_called=funcs_called),
        context["run_id"])


# What LangBot lets a listener change (the rest of an event is for it to read).
SETTABLE_FIELDS = ("user_message_alter", "reply_message_chain", "default_prompt", "prompt")


def changed(before: dict, after: dict) -> bool:
    """Whether a listener changed what it may change in the event."""
    def settable(event_context: dict) -> list:
        event = event_context.get("event") or {}
        return [event.get(name) for name in SETTABLE_FIELDS]
    return settable(before) != settable(after)


def prevented(event_context: dict) -> bool:
    return bool(event_context.get("is_prevent_default"))


def stops_the_rest(event_context: dict) -> bool:
    return bool(event_context.get("is_prevent_postorder"))


def reply_message(event_context: dict) -> dict | None:
    """The `reply_message_chain` a listener set, as an assistant message (its text; an image
    as its link)."""
    chain = (event_context.get("event") or {}).get("reply_message_chain")
    return None if chain is None else chain_message(chain)


def altered_input(event_context: dict) -> str | None:
    """The message text a listener rewrote (`user_message_alter`), if it did."""
    alter = (event_context.get("event") or {}).get("user_message_alter")
    if alter is None:
        return None
    if isinstance(alter, str):
        return alter
    elements = alter if isinstance(alter, list) else [alter]
    return "".join(element.get("text") or "" for element in elements
                   if isinstance(element, dict) and element.get("type") == "text")


def prompt_messages(event_context: dict) -> tuple[list[dict], list[dict]]:
    """The system messages and the conversation as the listeners left them."""
    event = event_context.get("event") or {}
    return ([_as_dict(message) for message in event.get("default_prompt") or []],
            [_as_dict(message) for message in event.get("prompt") or []])


def _as_dict(message: dict) -> dict:
    """An SDK message as LangHost's (OpenAI's shape): what it leaves unset left out."""
    kept = {key: value for key, value in message.items()
            if value is not None and key in ("role", "content", "name", "tool_calls",
                                             "tool_call_id")}
    if isinstance(kept.get("content"), list):
        kept["content"] = [{key: value for key, value in element.items() if value is not None}
                           for element in kept["content"] if isinstance(element, dict)]
    return kept
