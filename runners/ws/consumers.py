"""Live run streams over WebSockets.

`ws/runs/<run_id>/[?after_sequence=N]` sends the run's events in sequence order, each once,
then a final `run.status` frame, then closes (code 1000):

1. join the group `run.<run_id>` first, so nothing published from now on is missed;
2. replay the ledger after `after_sequence` (live events wait in the channel meanwhile);
3. forward live events: one at or below the last sequence sent is a duplicate and is dropped;
   one past the next expected sequence means a gap, filled from the ledger first;
4. end with the status frame when the orchestrator publishes it, or when the ledger says the
   run has ended (a poll every `POLL_SECONDS` also covers runs executed by a process whose
   events do not reach this one, and runs the reaper failed).

Frames are JSON: events (`ledger.wire.RunEvent`), then the `run.status` frame
(`ledger.wire.RunStatusFrame`).

Close codes: 4401 not signed in, 4403 not allowed to see the run (also for a run that does
not exist, unless the user is a superuser: 4404), 4400 bad `after_sequence`. A run is seen by
its actor, its project's owner and superusers (`runners.conversations.selectors`).
"""

import asyncio
import json
import logging
from contextlib import aclosing
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from rest_framework.exceptions import APIException

from accounts.authentication import password_digest, still_signed_in
from ledger import wire
from ledger.models import TERMINAL_STATUSES, AgentRun
from ledger.selectors import conversations as conversation_selectors
from ledger.selectors import runs as readers
from runners.api import streaming
from runners.api.exceptions import error_body
from runners.api.message_body import message_multitask, message_parts
from runners.api.serializers.interactions import InteractionAnswerSerializer
from runners.conversations import interactions, selectors
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.exceptions import Refused

logger = logging.getLogger(__name__)

@database_sync_to_async
def _load_run(run_id: str) -> AgentRun | None:
    return readers.get(run_id, "run_id", "project_id", "status")


@database_sync_to_async
def can_view_run(user, run: AgentRun) -> bool:
    return selectors.can_view_run(user, run)


still_signed_in_async = database_sync_to_async(still_signed_in)


class RunStreamConsumer(AsyncWebsocketConsumer):
    """`ws/runs/<run_id>/?after_sequence=N`: a run's events, then its status (README). Every
    `RECHECK_SECONDS` the viewer is checked to be still signed in as they connected, else the
    stream closes with 4401."""

    POLL_SECONDS = 1.0
    RECHECK_SECONDS = 5.0
    # The run row appears a moment after `POST /runs?stream=1` announces its id.
    APPEAR_TIMEOUT = 5.0
    APPEAR_POLL = 0.1

    async def connect(self):
        self.run_id = self.scope["url_route"]["kwargs"]["run_id"]
        self.group = f"run.{self.run_id}"
        self.joined = False
        self.finished = False
        self.last_sent = 0
        self.lock = asyncio.Lock()
        self.watcher = None
        # Accept first: a refusal before the handshake reaches a browser as 1006, not our code.
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        after = self._after_sequence()
        if after is None:
            await self.close(code=4400)
            return
        run = await self._wait_for_run()
        if run is None:
            await self.close(code=4404 if user.is_superuser else 4403)
            return
        if not await can_view_run(user, run):
            await self.close(code=4403)
            return
        self.user, self.signed_in = user, _how_signed_in(self.scope, user)
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.joined = True
        self.last_sent = after
        async with self.lock:
            outcome = await readers.run_outcome(self.run_id)  # status before events: see _watch
            await self._send_from_ledger()
            if outcome.get("status") in TERMINAL_STATUSES:
                await self._finish(outcome)
                return
        self.watcher = asyncio.ensure_future(self._watch())

    async def disconnect(self, code):
        self.finished = True
        if self.watcher is not None:
            self.watcher.cancel()
        if self.joined:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.joined = False

    async def receive(self, text_data=None, bytes_data=None):
        """The stream is one-way; anything a client sends is ignored."""

    # --- group messages --------------------------------------------------------------------

    async def run_events(self, message):
        """The events one transaction committed, in order (the orchestrator's `_publish`)."""
        for event in message["events"]:
            await self._live(event)

    async def _live(self, event: dict) -> None:
        async with self.lock:
            if self.finished:
                return
            if event.get("type") == "run.status":
                await self._send_from_ledger()
                await self._finish(event)
                return
            sequence = event.get("sequence")
            if not isinstance(sequence, int) or sequence <= self.last_sent:
                return  # already sent (replayed, or filled from the ledger)
            if sequence > self.last_sent + 1:
                await self._send_from_ledger()  # a gap: the ledger has what was missed
            if sequence == self.last_sent + 1:
                await self._send_event(event)

    # --- steps -----------------------------------------------------------------------------

    def _after_sequence(self) -> int | None:
        query = parse_qs((self.scope.get("query_string") or b"").decode("latin-1"))
        raw = (query.get("after_sequence") or ["0"])[0] or "0"
        try:
            value = int(raw)
        except ValueError:
            return None
        return value if value >= 0 else None

    async def _wait_for_run(self) -> AgentRun | None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.APPEAR_TIMEOUT
        while True:
            run = await _load_run(self.run_id)
            if run is not None or loop.time() >= give_up:
                return run
            await asyncio.sleep(self.APPEAR_POLL)

    async def _send_event(self, event: dict) -> None:
        await self.send(text_data=wire.dumps(event))
        self.last_sent = event["sequence"]

    async def _send_from_ledger(self) -> None:
        for event in await readers.run_events(self.run_id, after=self.last_sent):
            await self._send_event(event)

    async def _finish(self, outcome: dict) -> None:
        self.finished = True
        await self.send(text_data=wire.dumps(wire.run_status(
            run_id=self.run_id, status=outcome.get("status"),
            status_reason=outcome.get("status_reason"), sequence=self.last_sent)))
        await self.close(code=1000)

    async def _watch(self) -> None:
        """Catch up from the ledger now and then; end when the ledger says the run ended.

        The status is read before the events: a run that had ended by then has all its
        events in the ledger already, so the status frame comes after the last of them.
        A failed poll (the database briefly away) is retried at the next one; after
        `failures_to_close` in a row the stream closes with 1011 instead of going quiet.
        """
        failures_to_close = 5
        failures = 0
        loop = asyncio.get_running_loop()
        recheck_at = loop.time() + self.RECHECK_SECONDS
        while not self.finished:
            await asyncio.sleep(self.POLL_SECONDS)
            async with self.lock:
                if self.finished:
                    return
                try:
                    if loop.time() >= recheck_at:
                        recheck_at = loop.time() + self.RECHECK_SECONDS
                        if not await still_signed_in_async(self.user, *self.signed_in):
                            self.finished = True
                            await self.close(code=4401)
                            return
                    outcome = await readers.run_outcome(self.run_id)
                    await self._send_from_ledger()
                    if outcome.get("status") in TERMINAL_STATUSES:
                        await self._finish(outcome)
                    failures = 0
                except Exception:
                    failures += 1
                    logger.exception("run stream %s: ledger poll failed (%d in a row)",
                                     self.run_id, failures)
                    if failures >= failures_to_close:
                        self.finished = True
                        await self.close(code=1011)


# --- conversations --------------------------------------------------------------------------

@database_sync_to_async
def _load_conversation(user, conversation_id: str, agent_id: str | None):
    """The caller's own conversation of that id (with `agent_id`, when the caller has several
    of that id) and its agent; (None, None) when there is none the caller may use."""
    candidates = list(conversation_selectors.owned_by(str(user.pk), conversation_id)[:2]
                      if agent_id is None else
                      conversation_selectors.owned_by(str(user.pk), conversation_id)
                      .filter(agent_id=agent_id)[:2])
    if len(candidates) != 1:
        return None, None
    try:
        agent = door.find_agent(Caller(user), candidates[0].agent_id)
    except Refused:
        return None, None
    return candidates[0], agent


class SignedOut(Exception):
    """The socket's user was deactivated, changed password or signed out since it connected."""


def origin_of(scope: dict) -> str:
    """The origin the socket was opened on (`http(s)://host`), as a request's absolute URLs
    have it: the links a message's files get start with it."""
    headers = dict(scope.get("headers") or [])
    host = headers.get(b"host", b"").decode("latin-1")
    if not host:
        return ""
    return f"{'https' if scope.get('scheme') in ('wss', 'https') else 'http'}://{host}"


def _how_signed_in(scope, user) -> tuple:
    """What `still_signed_in` checks again: the password's digest, and the token, or else the
    admin session, the socket was opened with."""
    token = scope.get("auth_token")
    session = scope.get("session")
    return (password_digest(user), token,
            None if token is not None or session is None else session.session_key)


@database_sync_to_async
def _prepare(user, signed_in: tuple, conversation, data: dict, origin: str):
    if not still_signed_in(user, *signed_in):
        raise SignedOut
    url = (f"{origin}/api/v1/projects/{conversation.project_id}/agents/{conversation.agent_id}/"
           f"conversations/{conversation.client_id}/artifacts")
    return door.prepare_agent_run(Caller(user), agent_id=conversation.agent_id,
                                  conversation_id=conversation.client_id,
                                  parts=message_parts(data), artifact_url=url,
                                  multitask=message_multitask(data))


@database_sync_to_async
def _prepare_answer(user, signed_in: tuple, conversation, frame: dict):
    if not still_signed_in(user, *signed_in):
        raise SignedOut
    answer = InteractionAnswerSerializer(data={key: frame[key] for key in (
        "token", "action_id", "values") if key in frame})
    answer.is_valid(raise_exception=True)
    return interactions.prepare_answer(
        Caller(user), agent_id=conversation.agent_id,
        conversation_id=conversation.client_id, interaction_id=str(frame.get("interaction_id")),
        source="websocket", **answer.validated_data)


# A frame that answers a question a run asked in the conversation.
ANSWER = "interaction.answer"


class ConversationConsumer(AsyncWebsocketConsumer):
    """`ws/conversations/<conversation_id>/[?agent_id=]`: talk to the conversation's agent.

    Send `{"type": "message", "text": ..., "attachments": [...], "multitask_strategy"?}`, or
    `{"type": "interaction.answer", "interaction_id", "token", "action_id", "values"}` to
    answer a question a run asked (an `interaction.requested` frame); receive the same frames
    as `POST .../messages?stream=1` (`run.started`, deltas and messages, questions,
    `run.finished` or `run.refused`), the run's ledger events as `{"type": "run.event", "event": {...}}`, and
    `{"type": "error", "status", "detail"[, "errors"]}` when the message is refused (the
    status the REST endpoint would answer). One message runs at a time per connection;
    closing the socket cancels the run. Each message checks the user is still signed in as
    they connected (active, same password, their token neither expired nor signed out), else
    the socket closes with 4401. Close codes: 4401 not signed in, 4404 no conversation
    of the caller's with that id (someone else's is not found either; `agent_id` tells apart
    two of the caller's conversations with one id).
    """

    async def connect(self):
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        query = parse_qs((self.scope.get("query_string") or b"").decode("latin-1"))
        agent_id = (query.get("agent_id") or [None])[0]
        self.conversation, agent = await _load_conversation(user, conversation_id, agent_id)
        if self.conversation is None:
            await self.close(code=4404)
            return
        self.user, self.task, self.group = user, None, None
        # How the user signed in, checked again with each message (`still_signed_in`).
        self.signed_in = _how_signed_in(self.scope, user)
        await self._send({"type": "ready", "conversation_id": conversation_id,
                          "agent": agent.name, "agent_id": str(agent.pk)})

    async def disconnect(self, code):
        task = getattr(self, "task", None)
        if task is not None and not task.done():
            task.cancel()  # the run ends `consumer_cancelled`; the agent goes back to idle
        await self._leave_group()

    async def receive(self, text_data=None, bytes_data=None):
        try:
            frame = json.loads(text_data or "")
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
            await self._send({"type": "error", "status": 400, "detail": "Frames are JSON objects."})
            return
        if not isinstance(frame, dict) or frame.get("type") not in ("message", ANSWER):
            await self._send({"type": "error", "status": 400, "detail": (
                'Send {"type": "message", "text": ..., "attachments": [...]} or {"type": '
                f'"{ANSWER}", "interaction_id": ..., "token": ..., "action_id": ..., '
                '"values": {...}}.')})
            return
        if self.task is not None and not self.task.done():
            await self._send({"type": "error", "status": 409,
                              "detail": "A message is still running on this connection."})
            return
        self.task = asyncio.ensure_future(self._talk(frame))

    async def run_events(self, message):
        # The run's events, then its `run.status` frame, as the run's own stream sends them.
        for frame in message["events"]:
            await self._send(frame if frame.get("type") == "run.status"
                             else {"type": "run.event", "event": frame})

    async def _talk(self, frame: dict) -> None:
        try:
            if frame["type"] == ANSWER:
                prepared = await _prepare_answer(self.user, self.signed_in, self.conversation,
                                                 frame)
            else:
                data = {key: frame[key] for key in ("text", "attachments", "multitask_strategy")
                        if key in frame}
                prepared = await _prepare(self.user, self.signed_in, self.conversation, data,
                                          origin_of(self.scope))
        except SignedOut:
            await self.close(code=4401)
            return
        except (Refused, APIException) as exc:
            status, body = error_body(exc)
            await self._send({"type": "error", "status": status, **body})
            return
        self.group = f"run.{prepared.run_id}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        try:
            async with aclosing(streaming.message_body(prepared, stream=True)) as frames:
                async for line in frames:
                    await self.send(text_data=line.rstrip("\n"))
        finally:
            await self._leave_group()

    async def _leave_group(self) -> None:
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = None

    async def _send(self, frame: dict) -> None:
        await self.send(text_data=wire.dumps(frame))


