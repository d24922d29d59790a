"""Whether LangHost's reads and writes stay flat as the ledger grows.

Builds two ledgers of realistic runs (6-12 events each, transcripts, event log rows, model
calls; three users' conversations over 30 days) — a small one and a large one — serves each
with `manage.py serve` (SQLite, as `make run`), and measures, interleaved (small, large, small,
large, ...), every list and detail endpoint and admin page an operator uses, then sequential
agent runs and conversation messages (the write path). Prints, per request, the median on each
ledger and their ratio, and the bytes the large ledger's database holds per run.

    .venv/bin/python bench/ledger_scale.py [--small 10000] [--large 300000] [--rounds 15]

The last line reads `ledger: worst_read_ratio=X write_ratio=Y bytes_per_run=Z`.
"""

import argparse
import base64
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
OWNER = {"email": "owner@example.com", "password": "Bench-Owner-Passw0rd"}
ADMIN = {"email": "bench-admin@example.com", "password": "Bench-Admin-Passw0rd"}
MEMBERS = ["member-1@example.com", "member-2@example.com"]
START_LIMIT_SECONDS = 180
WRITES = 200
EVENT_TEXT = "a streamed piece of the answer, as long as a realistic delta tends to be " * 2


def environment(data_dir: Path) -> dict:
    env = {key: value for key, value in os.environ.items()
           if key not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")}
    env.update(LANGHOST_DATA_DIR=str(data_dir), LANGHOST_PLUGINS_DIR=str(data_dir / "plugins"),
               LANGHOST_LOG_LEVEL="WARNING", LANGHOST_RUNS_PER_USER="100000/second")
    return env


# --- building a ledger (in a process of its own, on its data dir) ----------------------------

def generate(runs: int) -> None:
    """Fill this process's database (`LANGHOST_DATA_DIR`) with `runs` runs."""
    import django

    from langhost.base import data_dir

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "langhost.settings")
    data_dir.prepare()
    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.utils import timezone

    from accounts.models import Project, User
    from ledger.models import (
        AgentRun,
        AgentRunEvent,
        Conversation,
        EventLog,
        ModelCall,
        RunGrants,
        Transcript,
    )
    from ledger.services import rollups
    from ledger.services.runs import grants_digest
    from runners.models import AgentInstance, AgentType

    call_command("migrate", verbosity=0)
    for model in (AgentRun, AgentRunEvent, Transcript, EventLog, ModelCall):
        model._meta.get_field("created_at").auto_now_add = False  # the generated dates stand
    random.seed(7)
    owner = User.objects.create_user(email=OWNER["email"], password=OWNER["password"])
    User.objects.create_superuser(email=ADMIN["email"], password=ADMIN["password"])
    members = [User.objects.create_user(email=email, password=OWNER["password"])
               for email in MEMBERS]
    project = Project.objects.create(name="Scale", slug="scale", owner=owner)
    project.members.add(*members)
    kind = AgentType.objects.create(name="Echo", slug="echo", runner_id="builtin:echo")
    agents = [AgentInstance.objects.create(name=f"Agent {n}", project=project, agent_type=kind)
              for n in range(3)]
    users = [owner, *members]
    now = timezone.now()
    authorization = {"runner": {"id": "builtin:echo", "permissions": {"models": ["invoke"]}},
                     "resources": {"models": [{"model_id": str(uuid.uuid4()), "name": f"m{n}",
                                               "operations": ["invoke", "stream"]}
                                              for n in range(8)],
                                   "tools": [{"tool_name": f"tool_{n}", "source": "mcp",
                                              "operations": ["detail", "call"],
                                              "description": "does a thing " * 4}
                                             for n in range(6)]},
                     "state": {"scopes": ["conversation", "actor"]}}
    # As the host writes a run: its binding's part of the authorization once (`RunGrants`),
    # its own part (state keys, ids) on its row.
    digest = grants_digest(authorization)
    RunGrants.objects.create(digest=digest, snapshot=authorization)
    conversations = []
    for n in range(max(1, runs // 5)):
        user, agent = users[n % 3], agents[n % 3]
        conversations.append(Conversation(
            conversation_id=f"scale-{n}", client_id=f"c-{n}", project_id=str(project.pk),
            agent_id=str(agent.pk), user_id=str(user.pk)))
    Conversation.objects.bulk_create(conversations, batch_size=5000)
    batch = 2000
    for start in range(0, runs, batch):
        run_rows, events, lines, logs, calls = [], [], [], [], []
        for n in range(start, min(runs, start + batch)):
            conversation = conversations[n % len(conversations)]
            user = users[(n % len(conversations)) % 3]
            created = now - timedelta(days=30) * (1 - n / runs)
            run_id, event_id = f"run-{n}", f"event-{n}"
            run_rows.append(AgentRun(
                run_id=run_id, event_id=event_id, agent_id=conversation.agent_id,
                binding_id=f"agent:{conversation.agent_id}", runner_id="builtin:echo",
                conversation_id=conversation.conversation_id, project_id=str(project.pk),
                status="completed" if n % 17 else "failed", actor_type="user",
                actor_id=str(user.pk), started_at=created, finished_at=created,
                usage_json={"prompt_tokens": 30, "completion_tokens": 12},
                grants_digest=digest, authorization_json={
                    "conversation_id": conversation.conversation_id, "thread_id": "",
                    "project_id": str(project.pk), "state_context": {"conversation": {
                        "scope_key": f"conversation:{conversation.conversation_id}"}}},
                metadata_json={"event_type": "message.received"}, created_at=created))
            for sequence in range(1, random.randint(6, 12) + 1):
                events.append(AgentRunEvent(run_id=run_id, sequence=sequence, type="message.delta",
                                            data_json={"chunk": {"content": EVENT_TEXT}},
                                            created_at=created))
            lines += [Transcript(conversation_id=conversation.conversation_id, role="user",
                                 event_id=event_id, content=f"question {n}", created_at=created),
                      Transcript(conversation_id=conversation.conversation_id, role="assistant",
                                 run_id=run_id, content=f"answer {n}", created_at=created)]
            logs.append(EventLog(event_id=event_id, idempotency_key=f"{event_id}~k",
                                 event_type="message.received", run_id=run_id,
                                 conversation_id=conversation.conversation_id,
                                 input_summary=f"question {n}", created_at=created))
            calls.append(ModelCall(run_id=run_id, agent_id=conversation.agent_id, model_id="m",
                                   model_name="gpt", status="ok", input_tokens=30,
                                   output_tokens=12, created_at=created))
        with transaction.atomic():
            AgentRun.objects.bulk_create(run_rows)
            AgentRunEvent.objects.bulk_create(events)
            Transcript.objects.bulk_create(lines)
            EventLog.objects.bulk_create(logs)
            ModelCall.objects.bulk_create(calls)
    rollups.rebuild()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


# --- serving and measuring ---------------------------------------------------------------------

class Served:
    """One ledger served by `manage.py serve`, with signed-in clients."""

    def __init__(self, name: str, data_dir: Path, runs: int):
        self.name, self.data_dir, self.runs = name, data_dir, runs
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(self.port)], cwd=ROOT,
            env=environment(data_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def sign_in(self) -> None:
        give_up = time.monotonic() + START_LIMIT_SECONDS
        while True:
            try:
                answer = httpx.post(f"{self.url}/api/v1/auth/login", json=OWNER, timeout=30)
                if answer.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > give_up:
                raise SystemExit(f"the {self.name} ledger's server did not come up")
            time.sleep(0.2)
        self.api = httpx.Client(base_url=self.url, timeout=60, headers={
            "Authorization": f"Bearer {answer.json()['access_token']}"})
        self.admin = httpx.Client(base_url=self.url, timeout=60)
        page = self.admin.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        signed = self.admin.post("/admin/login/?next=/admin/", data={
            "csrfmiddlewaretoken": token, "username": ADMIN["email"],
            "password": ADMIN["password"]}, headers={"Referer": f"{self.url}/admin/login/"})
        if signed.status_code not in (200, 302) or "sessionid" not in self.admin.cookies:
            raise SystemExit(f"could not sign in to the admin: {signed.status_code}")
        self.project = self.api.get("/api/v1/projects").json()["data"][0]["id"]
        self.agent = self.api.get(f"/api/v1/projects/{self.project}/agents").json()["data"][0]
        self.run_id = f"run-{self.runs // 2}"
        self.run_pk = self.runs // 2 + 1
        self.conversations = f"/api/v1/projects/{self.project}/agents/{self.agent['id']}" \
                             "/conversations"
        self.busy_conversation = self.api.get(self.conversations).json()["data"][0]["id"]
        self.conversation = self.api.post(self.conversations, json={}).json()["id"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def bytes_per_run(self) -> float:
        database = self.data_dir / "langhost.sqlite3"
        sizes = sum(path.stat().st_size for path in database.parent.glob(database.name + "*"))
        return sizes / self.runs


def deep_cursor(pk: int) -> str:
    """A runs list cursor as `langhost.base.keyset` makes it: the page beyond run `pk`."""
    return base64.urlsafe_b64encode(json.dumps(["b", pk]).encode()).decode().rstrip("=")


READS = {
    "runs list": lambda s: s.api.get("/api/v1/runs"),
    "runs list, deep page": lambda s: s.api.get(f"/api/v1/runs?cursor={deep_cursor(s.run_pk)}"),
    "run detail": lambda s: s.api.get(f"/api/v1/runs/{s.run_id}"),
    "run events": lambda s: s.api.get(f"/api/v1/runs/{s.run_id}/events"),
    "run model calls": lambda s: s.api.get(f"/api/v1/runs/{s.run_id}/model-calls"),
    "conversations list": lambda s: s.api.get(s.conversations),
    "conversation detail": lambda s: s.api.get(f"{s.conversations}/{s.busy_conversation}"),
    "conversation transcript": lambda s: s.api.get(
        f"{s.conversations}/{s.busy_conversation}/messages"),
    "agent metrics": lambda s: s.api.get(
        f"/api/v1/projects/{s.project}/agents/{s.agent['id']}/metrics"),
    "admin dashboard": lambda s: s.admin.get("/admin/"),
    "admin runs": lambda s: s.admin.get("/admin/ledger/agentrun/"),
    "admin run search": lambda s: s.admin.get(f"/admin/ledger/agentrun/?q={s.run_id}"),
    "admin event log": lambda s: s.admin.get("/admin/ledger/eventlog/"),
    "admin transcripts": lambda s: s.admin.get("/admin/ledger/transcript/"),
    "admin model calls": lambda s: s.admin.get("/admin/ledger/modelcall/"),
}


def timed(request) -> float:
    started = time.perf_counter()
    answer = request()
    elapsed = time.perf_counter() - started
    if answer.status_code not in (200, 201):
        raise SystemExit(f"{answer.request.url} answered {answer.status_code}: "
                         f"{answer.text[:300]}")
    return elapsed


def write(served: Served, n: int) -> httpx.Response:
    if n % 2:
        return served.api.post("/api/v1/runs", json={"agent_id": served.agent["id"],
                                                     "input": {"text": f"write {n}"}})
    return served.api.post(
        f"/api/v1/projects/{served.project}/agents/{served.agent['id']}/conversations/"
        f"{served.conversation}/messages", json={"text": f"write {n}"})


def measure(small: Served, large: Served, rounds: int) -> tuple[dict, list, list]:
    samples = {name: ([], []) for name in READS}
    for _ in range(rounds):
        for name, request in READS.items():
            for side, served in enumerate((small, large)):
                samples[name][side].append(timed(lambda: request(served)))  # noqa: B023
    writes = ([], [])
    for n in range(WRITES):
        for side, served in enumerate((small, large)):
            writes[side].append(timed(lambda: write(served, n)))  # noqa: B023
    return samples, *writes


def probe(served: Served, seconds: float, every: float = 0.1) -> list[float]:
    """A run-detail request every `every` seconds for `seconds`: how long each took (a stall
    of the reaper or any periodic work shows as an outlier)."""
    took = []
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        started = time.monotonic()
        took.append(timed(lambda: served.api.get(f"/api/v1/runs/{served.run_id}")))
        time.sleep(max(0.0, every - (time.monotonic() - started)))
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=15, help="requests of each read, each side")
    parser.add_argument("--probe", type=float, default=90,
                        help="seconds of run-detail requests every 100 ms on the large ledger")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="langhost-ledger-scale-") as tmp:
        sides = []
        for name, runs in (("small", args.small), ("large", args.large)):
            data_dir = Path(tmp) / name
            (data_dir / "plugins").mkdir(parents=True)
            started = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--generate", str(runs)], cwd=ROOT,
                           env=environment(data_dir), check=True)
            print(f"{name} ledger: {runs} runs built in {time.perf_counter() - started:.0f} s",
                  flush=True)
            sides.append(Served(name, data_dir, runs))
        try:
            for served in sides:
                served.sign_in()
            reads, small_writes, large_writes = measure(*sides, args.rounds)
            probed = probe(sides[1], args.probe)
        finally:
            for served in sides:
                served.stop()
        ratios = {}
        for name, (small, large) in reads.items():
            ratios[name] = statistics.median(large) / statistics.median(small)
            print(f"{name:>22}: {statistics.median(small) * 1000:7.1f} ms -> "
                  f"{statistics.median(large) * 1000:7.1f} ms  x{ratios[name]:.2f}")
        write_ratio = statistics.median(large_writes) / statistics.median(small_writes)
        print(f"{'writes (runs, messages)':>22}: {statistics.median(small_writes) * 1000:7.1f} "
              f"ms -> {statistics.median(large_writes) * 1000:7.1f} ms  x{write_ratio:.2f}")
        print(f"run detail every 100 ms for {args.probe:.0f} s on the large ledger: "
              f"{len(probed)} requests, median {statistics.median(probed) * 1000:.1f} ms, "
              f"slowest {max(probed) * 1000:.1f} ms, "
              f"{sum(took > 0.1 for took in probed)} over 100 ms")
        worst = max(ratios, key=ratios.get)
        print(f"worst read: {worst}; targets: worst_read_ratio <= 1.5, write_ratio <= 1.2, "
              "bytes_per_run <= 5000")
        print(f"ledger: worst_read_ratio={ratios[worst]:.2f} write_ratio={write_ratio:.2f} "
              f"bytes_per_run={sides[1].bytes_per_run():.0f}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if len(sys.argv) == 3 and sys.argv[1] == "--generate":
        generate(int(sys.argv[2]))
    else:
        main()
