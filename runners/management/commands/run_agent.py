import asyncio
import json
import logging

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from langhost.base.commands import migrations_pending
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.exceptions import Refused
from runners.management.cli import agent_named, user_named
from runners.plugins.gateway import get_gateway
from runners.protocol import RunRefused


class Command(BaseCommand):
    help = ("Run an agent or a runner once and print its reply as it streams, then the run's id "
            "and status. Exits 0 only when the run completed. It acts as an account (--user; "
            "else the admin account, else the first superuser), through the same door and "
            "rights as the API.")

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--runner", help="runner id, e.g. plugin:author/plugin/runner")
        target.add_argument("--agent", help="agent instance: its id, or its name")
        parser.add_argument("--user", help="the account's e-mail (default: the admin account)")
        parser.add_argument("--event-id", help="event id (a repeated id replays its run)")
        parser.add_argument("--conversation",
                            help="conversation id, as the account knows it (the API's `id`)")
        parser.add_argument("--timeout", type=float, help="seconds before the run times out")
        parser.add_argument("--verbose", action="store_true",
                            help="also show LangHost's and the plugin runtime's log")
        parser.add_argument("text", help="the message to send")

    def handle(self, *args, **options):
        if not options["verbose"]:
            logging.getLogger().setLevel(logging.WARNING)
        if migrations_pending():  # like `serve`: a fresh data dir gets its tables, quietly
            call_command("migrate", interactive=False, verbosity=0)
        caller = Caller(user_named(options["user"]))
        agent = agent_named(options["agent"]) if options["agent"] else None
        status = asyncio.run(self._run(caller, agent, options))
        if status not in ("completed", "steered"):
            raise CommandError(f"run ended with status {status}")

    async def _run(self, caller: Caller, agent, options) -> str:
        # Its own thread for the door's database work: the runtime's discovery, which a first
        # run may wait for, needs the shared one.
        async with ThreadSensitiveContext():
            try:
                return await self._send(caller, agent, options)
            finally:
                await get_gateway().stop()

    async def _send(self, caller: Caller, agent, options) -> str:
        # The command line goes through the same door as everyone else.
        common = {"event_input": {"text": options["text"]}, "event_id": options["event_id"],
                  "conversation_id": options["conversation"], "timeout": options["timeout"],
                  "source": "system"}
        try:
            if agent is not None:
                prepared = await sync_to_async(door.prepare_agent_run)(
                    caller, agent_id=agent.pk, **common)
            else:
                prepared = await door.prepare_runner_run(
                    caller, runner_id=options["runner"], binding_prefix="cli", **common)
        except Refused as exc:
            raise CommandError(exc.detail) from exc
        reply = Reply(self.stdout)
        messages = []
        try:
            async for message in door.execute(prepared):
                messages.append(message.as_dict())
                reply.show(message)
            outcome = await door.outcome(prepared, messages)
        except RunRefused as exc:
            raise CommandError(str(exc)) from exc
        reply.end()
        failed = outcome["status"] != "completed" and outcome["status_reason"]
        self.stdout.write(f"run {outcome['run_id']} {outcome['status']}"
                          + (f": {outcome['status_reason']}" if failed else ""))
        return outcome["status"]


class Reply:
    """A reply printed once: its deltas as they arrive, then what the completed message adds
    to them (all of it when nothing streamed, or when it says something else)."""

    def __init__(self, out):
        self.out = out
        self.streamed = ""

    def show(self, message) -> None:
        if message.type == "message.delta":
            content = (message.data.get("chunk") or {}).get("content")
            if isinstance(content, str):
                self.out.write(content, ending="")
                self.out.flush()
                self.streamed += content
        elif message.type == "message.completed":
            content = (message.data.get("message") or {}).get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            if self.streamed and text.startswith(self.streamed):
                self.out.write(text[len(self.streamed):])
            else:
                self.end()
                self.out.write(text)
            self.streamed = ""

    def end(self) -> None:
        if self.streamed:
            self.out.write("")
            self.streamed = ""
