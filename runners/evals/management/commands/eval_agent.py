import asyncio
import json
import logging
from pathlib import Path

from asgiref.sync import ThreadSensitiveContext
from django.core.management.base import CommandError
from django.utils import timezone

from langhost.base.commands import DatabaseCommand
from runners.evals import services
from runners.evals.evalset import EvalSetError, load
from runners.management.cli import agent_named
from runners.models import AgentInstance
from runners.plugins.gateway import get_gateway


class Command(DatabaseCommand):
    help = ("Run an eval set (YAML: cases of turns with expected replies, tool calls and "
            "rubrics) against an agent, each case in a fresh conversation; print pass or fail "
            "per case and criterion, write the JSON report and keep it (the admin shows it). "
            "Exits 1 when a case failed.")

    def add_arguments(self, parser):
        parser.add_argument("agent", help="the agent instance: its id, or its name")
        parser.add_argument("evalset", type=Path, help="the eval set's YAML file")
        parser.add_argument("--judge", help="the model that grades rubrics (else the eval "
                                            "set's `judge_model`)")
        parser.add_argument("--report", type=Path, help="where to write the JSON report "
                                                        "(default: eval-reports/<set>-<time>.json)")

    def handle(self, *args, agent, evalset, judge=None, report=None, **options):
        logging.getLogger().setLevel(logging.WARNING)
        try:
            cases = load(evalset)
        except EvalSetError as exc:
            raise CommandError(f"{evalset}: {exc}") from None
        found = agent_named(agent)
        try:
            kept = asyncio.run(self._evaluate(found, cases, judge))
        except EvalSetError as exc:
            raise CommandError(f"{evalset}: {exc}") from None
        self._print(kept.report_json)
        path = report or Path("eval-reports") / (
            f"{cases.name}-{timezone.now():%Y%m%d-%H%M%S}.json".replace("/", "-"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(kept.report_json, indent=2, ensure_ascii=False))
        self.stdout.write(f"report: {path} (kept as eval report {kept.pk})")
        if kept.failed:
            raise CommandError(f"{kept.failed} of {kept.passed + kept.failed} case(s) failed")

    async def _evaluate(self, agent: AgentInstance, cases, judge):
        # Its own thread for the door's database work: the runtime's discovery, which the
        # first run may wait for, needs the shared one.
        async with ThreadSensitiveContext():
            try:
                return await services.evaluate(agent, cases, judge)
            finally:
                await get_gateway().stop()

    def _print(self, report: dict) -> None:
        rows = [(case["name"], criterion["name"], "PASS" if criterion["passed"] else "FAIL",
                 criterion["detail"])
                for case in report["cases"] for turn in case["turns"]
                for criterion in turn["criteria"]]
        widths = [max(len(row[i]) for row in [("case", "criterion", "result", ""), *rows])
                  for i in range(3)]
        self.stdout.write(f"{'case':<{widths[0]}}  {'criterion':<{widths[1]}}  result  detail")
        for case, criterion, result, detail in rows:
            line = f"{case:<{widths[0]}}  {criterion:<{widths[1]}}  {result:<6}  {detail}"
            self.stdout.write(self.style.SUCCESS(line) if result == "PASS"
                              else self.style.ERROR(line))
        total = report["passed"] + report["failed"]
        self.stdout.write(f"{report['passed']} of {total} case(s) passed: "
                          + ", ".join(f"{case['name']} {'PASS' if case['passed'] else 'FAIL'}"
                                      for case in report["cases"]))
