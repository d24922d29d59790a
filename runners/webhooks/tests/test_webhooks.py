"""Webhooks: a run's outcome reaches a real `http.server` on 127.0.0.1 once, signed with the
project's secret, also when its first answer is a 500 (retried); the run's own, its agent
type's and its project's URLs are each called once; an address that is not public (private,
shared, loopback, link-local, or one of those inside an IPv6 address) is refused without the
setting, naming the field; a delivery connects to the address it checked."""

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from asgiref.sync import async_to_sync

from runners.tests.conversation_fixtures import conversations_url, read_body
from runners.webhooks import services
from runners.webhooks.models import WebhookDelivery
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """A webhook receiver: records each POST (headers, body), answers the scripted codes."""

    def __init__(self, *codes: int):
        self.codes, self.received = list(codes), []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers), body))
                self.send_response(receiver.codes.pop(0) if receiver.codes else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    def wait_for(self, count: int, within: float) -> None:
        """Until `count` POSTs came, then as long again for one more, which must not come."""
        give_up = time.monotonic() + within
        while len(self.received) < count:
            assert time.monotonic() < give_up, f"got {len(self.received)} POSTs"
            time.sleep(0.05)
        time.sleep(scaled(1.5))


@pytest.fixture
def receiver():
    made = []

    def make(*codes):
        made.append(Receiver(*codes))
        return made[-1]

    yield make
    for receiver in made:
        receiver.server.shutdown()


def deliver_all(settings):
    settings.LANGHOST_WEBHOOK_BACKOFF_SECONDS = 0
    for _ in range(10):
        if not async_to_sync(services.deliver_due)():
            break


def test_a_runs_outcome_is_posted_once_signed_and_retried_after_a_500(
        user_client, agent, receiver, settings):
    hook = receiver(500)
    secret = user_client.post(f"/api/v1/projects/{agent.project_id}/webhook/rotate-secret"
                              ).json()["secret"]
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()["id"]
    answer = json.loads(read_body(user_client.post(
        f"{conversations_url(agent)}/{conversation}/messages",
        {"text": "hello", "webhook": hook.url}, format="json")))

    deliver_all(settings)

    (failed, delivered) = hook.received
    headers, body = delivered
    expected = hmac.new(secret.encode(), f"{headers['X-LangHost-Timestamp']}.".encode() + body,
                        hashlib.sha256).hexdigest()
    assert headers["X-LangHost-Signature"] == f"sha256={expected}"
    assert failed[1] == body  # the same outcome, again
    outcome = json.loads(body)
    assert (outcome["run_id"], outcome["status"]) == (answer["run_id"], "completed")
    delivery = WebhookDelivery.objects.get(run_id=answer["run_id"])
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == (
        "delivered", 2, 200)
    assert not async_to_sync(services.deliver_due)()  # nothing left: once


def test_the_project_and_the_agent_type_each_get_the_run_once(
        user_client, agent, receiver, settings):
    project_hook, type_hook = receiver(), receiver()
    user_client.put(f"/api/v1/projects/{agent.project_id}/webhook", {"url": project_hook.url},
                    format="json")
    agent.agent_type.webhook_url = type_hook.url
    agent.agent_type.save()
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()["id"]
    read_body(user_client.post(f"{conversations_url(agent)}/{conversation}/messages",
                               {"text": "hello"}, format="json"))

    deliver_all(settings)

    assert len(project_hook.received) == len(type_hook.received) == 1


def test_a_private_address_is_refused_without_the_setting(user_client, agent, settings):
    settings.LANGHOST_WEBHOOK_ALLOW_PRIVATE = False
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()["id"]

    refused = user_client.post(f"{conversations_url(agent)}/{conversation}/messages",
                               {"text": "hello", "webhook": "http://127.0.0.1:9/hook"},
                               format="json")
    project = user_client.put(f"/api/v1/projects/{agent.project_id}/webhook",
                              {"url": "http://10.0.0.7/hook"}, format="json")

    assert refused.status_code == 400 and "webhook" in refused.json()["errors"]
    assert "not a public address" in json.dumps(refused.json())
    assert project.status_code == 400 and "url" in project.json()["errors"]
    assert not WebhookDelivery.objects.exists()


@pytest.mark.parametrize("url", ["http://example.com:99999/hook", "http://example.com:x/hook",
                                 f"http://{'a' * 64}.example/hook"])
def test_a_url_that_cannot_be_parsed_or_resolved_is_a_400_naming_the_field(user_client, agent,
                                                                         settings, url):
    settings.LANGHOST_WEBHOOK_ALLOW_PRIVATE = False
    conversation = user_client.post(conversations_url(agent), {}, format="json").json()["id"]

    refused = user_client.post(f"{conversations_url(agent)}/{conversation}/messages",
                               {"text": "hello", "webhook": url}, format="json")
    project = user_client.put(f"/api/v1/projects/{agent.project_id}/webhook", {"url": url},
                              format="json")

    assert refused.status_code == 400 and "webhook" in refused.json()["errors"]
    assert project.status_code == 400 and "url" in project.json()["errors"]


@pytest.mark.parametrize("address", ["100.100.100.200", "100.64.0.1", "169.254.169.254",
                                     "[::ffff:127.0.0.1]", "[2002:7f00:1::1]", "[fd00::1]"])
def test_every_address_that_is_not_public_is_refused(user_client, agent, settings, address):
    settings.LANGHOST_WEBHOOK_ALLOW_PRIVATE = False

    project = user_client.put(f"/api/v1/projects/{agent.project_id}/webhook",
                              {"url": f"http://{address}/latest/meta-data"}, format="json")

    assert project.status_code == 400
    assert "not a public address" in project.json()["errors"]["url"][0]


def test_a_delivery_connects_to_the_address_it_checked_with_the_name_as_host(receiver):
    hook = receiver()
    port = hook.server.server_port
    url, host, extensions = services._pinned(f"http://hooks.invalid:{port}/hook", "127.0.0.1")

    with httpx.Client() as client:
        answer = client.post(url, content=b"{}", headers=host, extensions=extensions)

    assert answer.status_code == 200  # the name never resolved: the checked address was used
    ((headers, _),) = hook.received
    assert headers["Host"] == f"hooks.invalid:{port}"
    assert services._pinned("https://hooks.example:8443/x", "2001:db8::1") == (
        "https://[2001:db8::1]:8443/x", {"Host": "hooks.example:8443"},
        {"sni_hostname": "hooks.example"})
    # Credentials in the URL still go with it.
    assert services._pinned("http://me:pw@hooks.example/x", "192.0.2.7")[0] == \
        "http://me:pw@192.0.2.7/x"
