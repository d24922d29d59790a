import asyncio
import sys

from asgiref.sync import sync_to_async
from django.core.management.base import BaseCommand, CommandError

from runners.conversations import services as door
from runners.conversations.exceptions import Refused
from runners.execution.orchestrator import RunRefused
from runners.plugins.gateway import get_gateway


class Command(BaseCommand):
    help = "Run an agent or a runner once and stream its reply. Exits 0 only when the run completed."

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--runner", help="runner id, e.g. plugin:author/plugin/runner")
        target.add_argument("--agent", help="agent instance id (UUID)")
        parser.add_argument("--event-id", help="event id (a repeated id replays its run)")
        parser.add_argument("--conversation", help="conversation id")
        parser.add_argument("--timeout", type=float, help="seconds before the run times out")
        parser.add_argument("text", help="the message to send")

    def handle(self, *args, **options):
        status = asyncio.run(self._run(options))
        if status not in ("completed", "steered"):
            raise CommandError(f"run ended with status {status}")

    async def _run(self, options) -> str:
        # The operator at the command line goes through the same door as everyone else.
        common = {"event_input": {"text": options["text"]}, "event_id": options["event_id"],
                  "conversation_id": options["conversation"], "timeout": options["timeout"],
                  "source": "system"}
        try:
            if options["agent"]:
                prepared = await sync_to_async(door.prepare_agent_run)(
                    door.Caller.operator(), agent_id=options["agent"], **common)
            else:
                prepared = await door.prepare_runner_run(
                    door.Caller.operator(), runner_id=options["runner"], binding_prefix="cli",
                    **common)
        except Refused as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"run {prepared.run_id}")
        messages = []
        try:
            async for message in door.execute(prepared):
                messages.append(message.as_dict())
                self._show(message)
            outcome = await door.outcome(prepared, messages)
        except RunRefused as exc:
            raise CommandError(str(exc)) from exc
        finally:
            await get_gateway().stop()
        self.stdout.write("")
        self.stdout.write(f"run {outcome['run_id']} {outcome['status']}"
                          + (f": {outcome['status_reason']}" if outcome["status_reason"] else ""))
        return outcome["status"]

    def _show(self, message) -> None:
        """Deltas as they arrive on one line; each completed message on a line of its own."""
        if message.type == "message.delta":
            chunk = message.data.get("chunk") or {}
            sys.stdout.write(str(chunk.get("content") or ""))
            sys.stdout.flush()
            self._streaming = True
        elif message.type == "message.completed":
            if getattr(self, "_streaming", False):
                self.stdout.write("")
                self._streaming = False
            self.stdout.write(str((message.data.get("message") or {}).get("content") or ""))
