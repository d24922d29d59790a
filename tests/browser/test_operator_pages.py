"""The operator's way around the admin, and a long streamed run that stays light, in chromium."""

import json
import subprocess
import threading
import time

import pytest
from selenium.webdriver.common.by import By

from tests.browser.conftest import PYTHON, ROOT, STREAMING_ECHO, wait_until
from tests.timing import scaled

pytestmark = pytest.mark.browser

LONG_TEXT = ("ab " * 7000)[:20000]  # the largest message the API takes, 6,667 words


def test_the_root_url_reaches_the_admin_and_its_sidebar_has_playground_and_runtime(
        browser, browser_server):
    browser.get(f"{browser_server.url}/")

    wait_until(lambda: browser.find_elements(By.ID, "langhost-dashboard"), what="the dashboard")
    assert browser.current_url == f"{browser_server.url}/admin/"
    assert "LangHost" in browser.find_element(By.ID, "site-name").text
    browser.get(f"{browser_server.url}/admin/ledger/agentrun/")
    sidebar = browser.find_element(By.ID, "nav-sidebar")
    sidebar.find_element(By.LINK_TEXT, "Runtime").click()
    wait_until(lambda: "/admin/runtime/" in browser.current_url, what="the runtime page")
    browser.find_element(By.ID, "nav-sidebar").find_element(By.LINK_TEXT, "Playground").click()
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#playground[data-ready='1']"),
               what="the playground")


def test_a_plugins_page_opens_in_the_admin_sandboxed_and_asks_its_plugin(browser,
                                                                           browser_server):
    browser.get(f"{browser_server.url}/admin/runners/plugininstallation/?q=examples")
    browser.find_element(By.LINK_TEXT, "langhost/examples").click()
    browser.find_element(By.LINK_TEXT, "Status").click()
    frame = wait_until(lambda: browser.find_elements(By.ID, "plugin-page"), what="the frame")[0]

    browser.switch_to.frame(frame)
    try:
        answer = wait_until(lambda: "received" in browser.find_element(By.ID, "answer").text
                            and browser.find_element(By.ID, "answer").text,
                            what="the plugin's answer")
        title = browser.find_element(By.TAG_NAME, "h1").text
        # Its own origin: nothing of the admin page, nor its cookies, is within its reach.
        reach = browser.execute_script(
            "try { return window.parent.document.title; } catch (e) { return e.name; }")
        cookies = browser.execute_script(
            "try { return document.cookie; } catch (e) { return e.name; }")
    finally:
        browser.switch_to.default_content()

    assert json.loads(answer) == {"method": "POST", "received": {"hello": "from the page"}}
    assert title == "LangHost examples: status"  # its translations, read beside it
    assert reach == "SecurityError" and cookies == "SecurityError"


def test_the_conversation_page_shows_the_transcript_and_runs(browser, browser_server):
    agent = (f"/api/v1/projects/{browser_server.project_id}/agents/"
             f"{browser_server.agent_id}/conversations")
    opened = browser_server.api("POST", agent, json={"title": "A chat in the browser"}).json()
    sent = browser_server.api("POST", f"{agent}/{opened['id']}/messages",
                              json={"text": "what is on the page?"}).json()
    assert sent["status"] == "completed", sent

    browser.get(f"{browser_server.url}/admin/ledger/conversation/")
    browser.find_element(By.LINK_TEXT, "A chat in the browser").click()
    transcript = wait_until(lambda: browser.find_elements(By.ID, "conversation-transcript"),
                            what="the conversation page")[0].text
    assert "what is on the page?" in transcript
    assert "e2e echo: what is on the page?" in transcript
    runs = browser.find_element(By.ID, "conversation-runs")
    runs.find_element(By.LINK_TEXT, sent["run_id"]).click()
    wait_until(lambda: browser.find_elements(By.ID, "run-live"), what="the run's page")
    assert browser.find_element(By.ID, "run-heading-status").text == "completed"


def start_long_run(server) -> dict:
    """The 20,000-character message to the streaming echo, read as a client would, in a
    thread; the dict gains `run_id` when it starts, `size` and `frames` when it ends."""
    seen = {}

    def stream():
        size = frames = 0
        with server.http.stream(
                "POST", "/api/v1/runs", params={"stream": "1"},
                headers={"Authorization": f"Bearer {server.admin_token}"},
                json={"runner_id": STREAMING_ECHO, "input": {"text": LONG_TEXT}}) as response:
            for line in response.iter_lines():
                size, frames = size + len(line) + 1, frames + 1
                if '"run.started"' in line:
                    seen["run_id"] = json.loads(line)["run_id"]
        seen.update(size=size, frames=frames)

    threading.Thread(target=stream, daemon=True).start()
    return seen


def test_a_long_streamed_run_page_is_interactive_at_once_and_cancel_acts_at_once(
        browser, browser_server, artifacts):
    long_run = start_long_run(browser_server)
    run_id = wait_until(lambda: long_run.get("run_id"), what="the long run to start")
    wait_until(lambda: len(browser_server.api("GET", f"/api/v1/runs/{run_id}/events")
                       .json()["data"]) > 3, what="the reply to stream")

    opened = time.monotonic()
    browser.get(f"{browser_server.url}/admin/runs/{run_id}/")
    wait_until(lambda: browser.execute_script(
        "const b = document.getElementById('run-cancel');"
        "return document.readyState === 'complete' && b && !b.disabled"
        " && document.querySelectorAll('#run-timeline-body tr.run-event').length > 0;"),
        what="the run page to be ready")
    interactive = time.monotonic() - opened
    assert interactive < scaled(3.0), f"interactive after {interactive:.1f} s"
    assert browser.find_element(By.ID, "run-heading-status").text == "running"

    clicked = time.monotonic()
    browser.find_element(By.ID, "run-cancel").click()
    wait_until(lambda: browser.find_element(By.ID, "run-status").text == "cancelled",
               what="the run to be cancelled")
    took = time.monotonic() - clicked
    assert took < scaled(1.0), f"cancelled after {took:.2f} s"
    assert browser.find_element(By.ID, "run-heading-status").text == "cancelled"
    streamed = browser.find_element(By.ID, "run-reply").text
    assert streamed and LONG_TEXT.startswith(streamed.strip())
    browser.save_screenshot(str(artifacts / "long_run_cancelled.png"))
    run = browser_server.api("GET", f"/api/v1/runs/{run_id}").json()
    assert run["status"] == "cancelled"
    wait_until(lambda: "size" in long_run, what="the client's stream to end")
    assert long_run["size"] < 3 * len(LONG_TEXT)


SEED_EVENTS = """
import uuid
from ledger.models import AgentRun, AgentRunEvent
run = AgentRun.objects.create(run_id=str(uuid.uuid4()), event_id=str(uuid.uuid4()),
                              runner_id="builtin:echo", status="completed", status_reason="stop")
AgentRunEvent.objects.bulk_create(
    [AgentRunEvent(run=run, sequence=n, type="message.delta",
                   data_json={"chunk": {"role": "assistant", "content": f"w{n} "}})
     for n in range(1, 10_001)], batch_size=500)
print(run.run_id)
"""


def test_a_run_of_ten_thousand_events_opens_at_once_and_loads_older_on_demand(
        browser, browser_server):
    seeded = subprocess.run([str(PYTHON), "manage.py", "shell", "-c", SEED_EVENTS],
                            cwd=ROOT, env=browser_server.env, capture_output=True, text=True,
                            timeout=scaled(120))
    assert seeded.returncode == 0, seeded.stderr
    run_id = seeded.stdout.strip().splitlines()[-1]

    opened = time.monotonic()
    browser.get(f"{browser_server.url}/admin/runs/{run_id}/")
    wait_until(lambda: browser.find_element(By.ID, "run-status").text == "completed"
               and len(timeline_rows(browser)) == 200, what="the newest events")
    assert time.monotonic() - opened < scaled(3.0)
    assert timeline_rows(browser)[0] == "9801" and timeline_rows(browser)[-1] == "10000"
    assert browser.find_element(By.ID, "run-event-count").text == "10000"

    browser.find_element(By.ID, "run-load-older").click()
    wait_until(lambda: len(timeline_rows(browser)) == 300, what="a page of older events")
    assert timeline_rows(browser)[0] == "9701"


def timeline_rows(browser) -> list[str]:
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('#run-timeline-body tr.run-event'))"
        ".map(row => row.dataset.sequence);")
