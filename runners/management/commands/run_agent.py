import asyncio
import sys

from asgiref.sync import sync_to_async
from django.core.management.base import BaseCommand, CommandError

from ledger.selectors import runs as readers
from runners.execution.agents import agent_binding_sync
from runners.execution.orchestrator import Orchestrator, RunRefused, new_run_id
from runners.execution.protocol import AgentBinding, AgentEventEnvelope
from runners.models import AgentInstance
from runners.plugins.gateway import LocalGateway


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
        if status != "completed":
            raise CommandError(f"run ended with status {status}")

    async def _run(self, options) -> str:
        fields = {"event_id": options["event_id"]} if options["event_id"] else {}
        event = AgentEventEnvelope(
            conversation_id=options["conversation"], input={"text": options["text"]},
            source="system", actor={"actor_type": "operator", "actor_id": "cli"}, **fields,
        )
        agent_name = ""
        if options["agent"]:
            agent = await sync_to_async(self._agent)(options["agent"])
            binding = await sync_to_async(agent_binding_sync)(agent, options["timeout"])
            event.agent_id, event.project_id, agent_name = str(agent.pk), str(agent.project_id), agent.name
        else:
            config = {"timeout": options["timeout"]} if options["timeout"] else {}
            binding = AgentBinding(binding_id=f"cli:{options['runner']}", runner_id=options["runner"],
                                   runner_config=config)
        gateway = LocalGateway()
        run_id = new_run_id()
        self.stdout.write(f"run {run_id}")
        try:
            async for message in Orchestrator(gateway).run(event, binding, run_id=run_id,
                                                           agent_name=agent_name):
                self._show(message)
        except RunRefused as exc:
            raise CommandError(str(exc)) from exc
        finally:
            await gateway.stop()
        outcome = await readers.run_outcome_for_event(event.event_id)
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

    @staticmethod
    def _agent(agent_id: str) -> AgentInstance:
        try:
            return AgentInstance.objects.select_related("agent_type").get(pk=agent_id)
        except (AgentInstance.DoesNotExist, ValueError) as exc:
            raise CommandError(f"No agent {agent_id}.") from exc
