"""Knowledge bases end to end over real daphne, on SQLite (sqlite-vec) and on PostgreSQL
(pgvector), as a user meets them: an embedding model on the local scripted server, a PDF and a
Markdown file uploaded over REST and ingested in the server's background with their progress
on the way, a damaged PDF failing alone, retrieval, an LLM agent that answers from the PDF and
cites it, a runner plugin in the real SDK runtime that retrieves through the SDK and is refused
another project's base by the host, and a deleted document leaving no chunk or vector behind."""

import contextlib
import json
import subprocess
import time

import httpx
import pytest

from langhost.local_servers import LocalServers
from runners.knowledge.tests.conftest import pdf_with
from tests.e2e.conftest import PYTHON, ROOT, daphne_with_plugins
from tests.fake_providers import FakeProvider, Reply
from tests.timing import scaled

pytestmark = pytest.mark.e2e

READER = "plugin:e2e/agent-runner-llm/kb-reader"
ANSWER = "Divers must register with the harbour master before entering the water."
# Long enough for several embedding batches, so the document's progress can be watched.
LONG_PDF = pdf_with(*[f"Page {n} of the tide almanac lists the tides of day {n}." for n in
                      range(1, 400)], ANSWER)
HANDBOOK = b"# Ferries\n\nThe ferry leaves the north pier every hour."


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request, tmp_path):
    """A daphne serving a fresh database of the kind, with the LLM fixture plugin."""
    with contextlib.ExitStack() as stack:
        env = {}
        if request.param == "postgresql":
            env["DATABASE_URL"] = stack.enter_context(LocalServers()).postgres.url
        yield stack.enter_context(daphne_with_plugins(tmp_path, "e2e__agent-runner-llm", **env))


@pytest.fixture
def provider():
    server = FakeProvider("openai").start()
    server.embedding_delay = 0.2
    yield server
    server.stop()


def in_database(env: dict, code: str):
    """What `code` (Python with Django set up) prints as JSON, run against the server's
    database."""
    done = subprocess.run([str(PYTHON), "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=scaled(120), check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def until(what: str, probe, timeout: float = 60):
    deadline = time.monotonic() + scaled(timeout)
    while (value := probe()) is None:
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)
    return value


@pytest.mark.slow("ingests a document through the worker, then asks an agent")
def test_knowledge_from_upload_to_a_cited_answer(server, provider, admin_credentials):
    url, env = server
    with httpx.Client(base_url=url, timeout=scaled(30)) as http:
        token = http.post("/api/v1/auth/login", json=admin_credentials).json()["access_token"]
        http.headers["Authorization"] = f"Bearer {token}"
        walk_through(http, env, provider)


def walk_through(http, env, provider):
    def made(path, **body):
        response = http.post(path, json=body)
        assert response.status_code == 201, response.text
        return response.json()

    remote = made("/api/v1/model-providers", name="local", kind="openai",
                  base_url=provider.base_url, api_key="sk-knowledge-e2e")
    embedder = made("/api/v1/models", name="embedder", provider_id=remote["id"],
                    upstream_model="embedder", model_type="embedding")
    made("/api/v1/models", name="chat", provider_id=remote["id"], upstream_model="chat",
         model_type="chat", context_window=8192)
    project = made("/api/v1/projects", name="Harbour", slug="harbour")
    other = made("/api/v1/projects", name="Vault", slug="vault")
    bases = f"/api/v1/projects/{project['id']}/knowledge-bases"
    base = made(bases, name="Rules", embedding_model_id=embedder["id"], chunk_size=40,
                chunk_overlap=5)
    secret = made(f"/api/v1/projects/{other['id']}/knowledge-bases", name="Secrets",
                  embedding_model_id=embedder["id"])
    documents = f"{bases}/{base['id']}/documents"

    uploaded = http.post(documents, files=[
        ("file", ("almanac.pdf", LONG_PDF, "application/pdf")),
        ("file", ("ferries.md", HANDBOOK, "text/markdown")),
        ("file", ("damaged.pdf", b"%PDF-1.4 nothing else", "application/pdf"))])

    assert uploaded.status_code == 202, uploaded.text
    ids = {document["name"]: document["id"] for document in uploaded.json()}
    seen = set()

    def all_ended():
        states = {name: http.get(f"{documents}/{pk}").json() for name, pk in ids.items()}
        seen.update((state["status"], state["progress"]) for state in states.values()
                    if 0 < state["progress"] < 1)
        ended = all(state["status"] in ("ready", "failed") for state in states.values())
        return states if ended else None

    states = until("ingestion", all_ended)
    assert states["almanac.pdf"]["status"] == states["ferries.md"]["status"] == "ready"
    assert any(status == "embedding" for status, _ in seen)  # progress, on the way
    assert states["damaged.pdf"]["status"] == "failed"
    assert "PDF" in states["damaged.pdf"]["status_reason"]

    found = http.post(f"{bases}/{base['id']}/retrieve",
                      json={"query": "where must divers register before entering the water"})
    assert found.status_code == 200, found.text
    assert ANSWER in found.json()[0]["text"]
    assert found.json()[0]["citation"]["document"] == "almanac.pdf"

    # An LLM agent of a type with the base answers from the PDF, and cites it.
    guide = made("/api/v1/agent-types", name="Guide", slug="guide", primary_model="chat",
                 knowledge_bases=[base["id"]])
    agents = f"/api/v1/projects/{project['id']}/agents"
    agent = made(agents, agent_type_id=guide["id"], name="Guide")
    conversations = f"{agents}/{agent['id']}/conversations"
    conversation = made(conversations)
    provider.script(Reply(text="With the harbour master [1]."))
    answered = http.post(f"{conversations}/{conversation['id']}/messages",
                         json={"text": "Where must divers register before entering the water?"}
                         ).json()

    assert answered["status"] == "completed", answered
    # Searched before the model answered: the passage is in what the model was sent.
    assert ANSWER in json.dumps(provider.calls()[-1].body["messages"])
    assert answered["reply"]["citations"][0]["document"] == "almanac.pdf"
    calls = in_database(env, "import json; from ledger.models import ModelCall; print(json.dumps("
                             f"sorted(set(ModelCall.objects.filter(run_id='{answered['run_id']}')"
                             ".values_list('operation', 'model_name')))))")
    assert ["embedding", "embedder"] in calls and ["stream", "chat"] in calls

    # A runner plugin in the real runtime retrieves through the SDK; another project's base
    # is refused by the host.
    until("the runner plugin", lambda: any(
        runner["id"] == READER for runner in http.get("/api/v1/runners").json()["data"]) or None)
    reader = made("/api/v1/agent-types", name="Reader", slug="reader", runner_id=READER,
                  runner_config={"knowledge-bases": [base["id"], secret["id"]],
                                 "probe-kb": secret["id"]})
    reading = made(agents, agent_type_id=reader["id"], name="Reader")
    reader_conversations = f"{agents}/{reading['id']}/conversations"
    talk = made(reader_conversations)
    report = http.post(f"{reader_conversations}/{talk['id']}/messages",
                       json={"text": "where must divers register"}).json()
    assert report["status"] == "completed", report
    report = json.loads(report["reply"]["content"])
    assert [kb["uuid"] for kb in report["listed"]] == [base["id"]]
    assert ANSWER in report["retrieved"][0]["content"][0]["text"]
    assert "kb.not_granted" in report["probe"]["error"]

    # Deleting the PDF removes its chunks and its vectors.
    count = ("import json; from django.db import connection; from runners.knowledge.models "
             "import Chunk, KnowledgeBase; kb = KnowledgeBase.objects.get(pk='{kb}'); "
             "cursor = connection.cursor(); cursor.execute('SELECT count(*) FROM "
             "knowledge_vectors_' + str(kb.dimensions) + ' WHERE partition = %s', [str(kb.pk)]); "
             "print(json.dumps([Chunk.objects.filter(knowledge_base=kb).count(), "
             "cursor.fetchone()[0]]))").format(kb=base["id"])
    chunks, vectors = in_database(env, count)
    assert chunks == vectors > 1
    assert http.delete(f"{documents}/{ids['almanac.pdf']}").status_code == 204
    assert in_database(env, count) == [1, 1]  # the handbook's one chunk
