"""Forks and re-runs of a conversation, from any of its entries.

- A **fork** is a new conversation of the caller with the same agent, starting as this one was
  at an entry: the entries up to it, and the session state its runs had written by then
  (`ledger.services.conversations.fork`).
- A **re-run from an entry** answers that entry's user message again (for an agent's reply,
  the user message it answered; optionally with the message's text edited) in a fork of the
  conversation as it was just before the message: the new run's history holds the entries
  before it and the message, nothing after. The original conversation is left as it was.

Both go through the door's own checks (`services.find_agent`, `find_conversation`,
`prepare_agent_run`): the caller must be allowed the agent and own the conversation.
"""

from ledger.models import Conversation, Transcript
from ledger.selectors import conversations as conversation_selectors
from ledger.services import conversations
from runners.conversations import services as door
from runners.conversations import targets
from runners.conversations.callers import Caller
from runners.conversations.exceptions import InvalidInput
from runners.conversations.input import Part


def _entry(conversation: Conversation, entry_id: int) -> Transcript:
    entry = conversation_selectors.entry(conversation.conversation_id, entry_id)
    if entry is None:
        raise InvalidInput(f"The conversation has no entry {entry_id}.", field="entry_id")
    return entry


def fork(caller: Caller, *, agent_id, project_id, conversation_id: str, entry_id: int,
         title: str = "") -> Conversation:
    """The conversation as it was at `entry_id` (that entry included), as a new one."""
    agent = door.find_agent(caller, agent_id, project_id)
    conversation = door.find_conversation(caller, agent, conversation_id)
    entry = _entry(conversation, entry_id)
    return conversations.fork(conversation, entry.pk, targets.state_identity(agent, conversation),
                              title=title or _fork_title(conversation, "Fork"))


def prepare_rerun(caller: Caller, *, agent_id, project_id, conversation_id: str,
                  entry_id: int, text: str | None = None,
                  artifact_url: str | None = None) -> tuple[door.PreparedRun, Conversation]:
    """The run that answers the user message at (or answered by) `entry_id` again, in a fork
    made for it; the run and the fork."""
    agent = door.find_agent(caller, agent_id, project_id)
    conversation = door.find_conversation(caller, agent, conversation_id)
    entry = _entry(conversation, entry_id)
    asked = entry if entry.role == "user" else conversation_selectors.user_message_before(
        conversation.conversation_id, entry.pk)
    if asked is None:
        raise InvalidInput(f"Entry {entry_id} answers no user message: nothing to run again.",
                       field="entry_id")
    text = asked.full_text if text is None else text
    if not text.strip():
        raise InvalidInput("The message to run again has no text.", field="text")
    before = conversation_selectors.entry_before(conversation.conversation_id, asked.pk)
    forked = conversations.fork(conversation, before, targets.state_identity(agent, conversation),
                                title=_fork_title(conversation, "Re-run"))
    prepared = door.prepare_agent_run(
        caller, agent_id=agent_id, project_id=project_id, conversation_id=forked.client_id,
        parts=[Part(text=text)], artifact_url=artifact_url)
    return prepared, forked


def _fork_title(conversation: Conversation, what: str) -> str:
    return f"{what} of {conversation.title or conversation.client_id}"[:200]
