"""The operator's admin pages in a real headless chromium against a real daphne and runtime."""

import json
import threading
import time
from pathlib import Path

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.browser.conftest import ECHO, SLOW, wait_until
from tests.timing import scaled

pytestmark = pytest.mark.browser


def start_streamed_run(server, text: str) -> tuple[dict, threading.Thread]:
    """POST a run of the slow runner in a background thread, as a client would.

    Returns a dict that gains `run_id` and `at` (monotonic time) once the run has started,
    and the thread, which keeps reading the stream until the run ends.
    """
    started = {}

    def stream():
        with server.http.stream(
                "POST", "/api/v1/runs", params={"stream": "1"},
                headers={"Authorization": f"Bearer {server.admin_token}"},
                json={"runner_id": SLOW, "input": {"text": text}}) as response:
            for line in response.iter_lines():
                if '"run.started"' in line:
                    started["at"] = time.monotonic()
                    started["run_id"] = json.loads(line)["run_id"]

    reader = threading.Thread(target=stream, daemon=True)
    reader.start()
    return started, reader


def chat_with(browser, agent_id: str) -> None:
    """Once the playground is ready, pick the agent to talk to."""
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#playground[data-ready='1']"),
               what="the playground")
    Select(browser.find_element(By.ID, "playground-target")).select_by_value(f"agent:{agent_id}")


def open_playground(browser, server, agent_id: str) -> None:
    browser.get(f"{server.url}/admin/playground/")
    chat_with(browser, agent_id)


def timeline_types(browser, tbody_id: str) -> list[str]:
    return [row.get_attribute("data-type")
            for row in browser.find_elements(By.CSS_SELECTOR, f"#{tbody_id} tr.run-event")]


def test_the_playground_shows_the_tools_an_agent_calls_above_its_reply(browser, browser_server):
    open_playground(browser, browser_server, browser_server.community_agent_id)
    browser.find_element(By.ID, "playground-input").send_keys("/demo echo hi")
    browser.find_element(By.ID, "playground-send").click()

    # The runner answers through the host's event_reply tool: the SDK reports the call.
    lines = wait_until(lambda: [el.text for el in browser.find_elements(
        By.CSS_SELECTOR, ".chat-agent .chat-tool")] or None, what="the tool call lines")
    assert lines[0].startswith("calls event_reply(") and '"text"' in lines[0]
    wait_until(lambda: len(browser.find_elements(By.CSS_SELECTOR, ".chat-agent .chat-tool")) == 2,
               what="the call's end")
    assert browser.find_elements(By.CSS_SELECTOR, ".chat-agent .chat-tool")[1].text.startswith(
        "event_reply returned")


def test_edit_and_resend_in_the_playground_goes_on_in_a_fork(browser, browser_server):
    open_playground(browser, browser_server, browser_server.agent_id)
    for text in ("first words", "second words"):
        browser.find_element(By.ID, "playground-input").send_keys(text)
        browser.find_element(By.ID, "playground-send").click()
        wait_until(lambda: browser.find_element(By.ID, "playground-send").is_enabled(),
                   what="the reply")

    browser.find_elements(By.CSS_SELECTOR, ".chat-user .chat-edit")[0].click()
    box = browser.find_element(By.CSS_SELECTOR, ".chat-edit-text")
    box.clear()
    box.send_keys("first words, edited")
    browser.find_element(By.CSS_SELECTOR, ".chat-resend").click()

    def replies():
        try:
            return [el.text for el in browser.find_elements(
                By.CSS_SELECTOR, ".chat-agent[data-status='completed'] .chat-text")]
        except StaleElementReferenceException:  # the old replies are being taken away
            return None

    wait_until(lambda: replies() == ["e2e echo: first words, edited"],
               what="only the edited message's reply")
    assert [el.text for el in browser.find_elements(By.CSS_SELECTOR, ".chat-user .chat-text")] == [
        "first words, edited"]
    assert browser.find_element(By.ID, "playground-conversation").text.endswith("(fork)")


def test_chat_with_the_echo_agent_in_the_playground_then_open_the_run(
        browser, browser_server, artifacts):
    browser.get(f"{browser_server.url}/admin/")
    browser.find_element(By.ID, "dash-playground-link").click()
    chat_with(browser, browser_server.agent_id)
    browser.find_element(By.ID, "playground-input").send_keys("hello from chromium")
    browser.find_element(By.ID, "playground-file").send_keys(str(Path(__file__).parent / "conftest.py"))
    browser.find_element(By.ID, "playground-send").click()

    reply = wait_until(lambda: [el for el in browser.find_elements(
        By.CSS_SELECTOR, ".chat-agent[data-status='completed'] .chat-text")], what="the reply")
    assert reply[0].text == "e2e echo: hello from chromium"
    assert "conftest.py" in browser.find_element(By.CSS_SELECTOR, ".chat-user").text
    wait_until(lambda: timeline_types(browser, "playground-timeline") == [
        "message.completed", "state.updated", "run.completed"], what="the playground timeline")
    wait_until(lambda: browser.find_element(By.ID, "run-status").text == "completed",
               what="the run's status")
    browser.save_screenshot(str(artifacts / "playground.png"))

    run_id = browser.find_element(By.ID, "playground-run-id").text
    browser.find_element(By.ID, "playground-run-link").click()
    wait_until(lambda: browser.find_elements(By.ID, "run-live"), what="the run detail page")
    wait_until(lambda: timeline_types(browser, "run-timeline-body") == [
        "message.completed", "state.updated", "run.completed"], what="the three events")
    assert browser.find_element(By.ID, "run-live").get_attribute("data-run-id") == run_id
    assert browser.find_element(By.ID, "run-status").text == "completed"
    assert browser.find_element(By.ID, "run-reply").text == "e2e echo: hello from chromium"
    assert "e2e.echo_count" in browser.find_element(By.ID, "run-state-changes").text
    assert "e2e echo: hello from chromium" in browser.find_element(By.ID, "run-transcript").text
    # The run carried the attachment as input.
    run = browser_server.api("GET", f"/api/v1/runs/{run_id}").json()
    assert run["agent_id"] == browser_server.agent_id and run["runner_id"] == ECHO
    browser.save_screenshot(str(artifacts / "run_detail.png"))


def test_a_slow_runs_timeline_grows_live_on_the_run_detail_page(browser, browser_server):
    started, runner = start_streamed_run(browser_server, "deltas:6:0.35")
    run_id = wait_until(lambda: started.get("run_id"), what="the slow run to start")
    browser.get(f"{browser_server.url}/admin/runs/{run_id}/")

    samples = []  # (seconds since start, rows on the page, status badge)
    deadline = time.monotonic() + scaled(15)
    while time.monotonic() < deadline:
        rows, status = browser.execute_script(  # one read: rows and badge of the same moment
            "return [document.querySelectorAll('#run-timeline-body tr.run-event').length,"
            " document.getElementById('run-status').textContent];")
        samples.append((time.monotonic() - started["at"], rows, status))
        if status == "completed":
            break
        time.sleep(0.05)
    runner.join(timeout=scaled(10))

    # Six deltas, the reply they make (a message of its own), run.completed.
    assert samples[-1][1:] == (8, "completed"), samples[-1]
    counts = [rows for _, rows, _ in samples]
    assert counts == sorted(counts), "the timeline only grows"
    seen_while_running = {rows for _, rows, status in samples if status == "running"}
    assert len(seen_while_running - {0}) >= 3, f"rows did not appear one by one: {samples}"
    first_full = next(t for t, rows, _ in samples if rows >= 6)
    first_one = next(t for t, rows, _ in samples if rows >= 1)
    assert first_full - first_one > 0.8, "the deltas arrived together, not live"
    reply = browser.find_element(By.ID, "run-reply").text
    assert reply == "delta 1delta 2delta 3delta 4delta 5delta 6"


def test_the_cancel_button_stops_an_active_run(browser, browser_server):
    # The slow runner sends one delta, then sleeps for 30 s.
    started, runner = start_streamed_run(browser_server, "sleep")
    run_id = wait_until(lambda: started.get("run_id"), what="the run to start")
    browser.get(f"{browser_server.url}/admin/runs/{run_id}/")
    wait_until(lambda: timeline_types(browser, "run-timeline-body") == ["message.delta"],
               what="the first delta")
    assert browser.find_element(By.ID, "run-status").text == "running"
    browser.find_element(By.ID, "run-cancel").click()

    wait_until(lambda: browser.find_element(By.ID, "run-status").text == "cancelled",
               timeout=10, what="the run to be cancelled")
    assert "cancelled by root@example.com" in browser.find_element(By.ID, "run-status-reason").text
    assert not browser.find_element(By.ID, "run-cancel").is_enabled()
    runner.join(timeout=scaled(10))


def test_a_non_members_websocket_is_refused(browser, browser_server):
    opened = browser_server.api(
        "POST", f"/api/v1/projects/{browser_server.project_id}/agents/{browser_server.agent_id}"
                "/conversations", json={"conversation_id": "browser-members-only"})
    assert opened.status_code == 201, opened.text
    created = browser_server.api("POST", "/api/v1/runs", json={
        "agent_id": browser_server.agent_id, "conversation_id": "browser-members-only",
        "input": {"text": "members only"}})
    assert created.status_code == 201, created.text
    run_id = created.json()["run_id"]
    open_socket = """
        const [url, done] = arguments;
        const socket = new WebSocket(url);
        const frames = [];
        socket.onmessage = (m) => frames.push(JSON.parse(m.data).type);
        socket.onclose = (e) => done({code: e.code, frames: frames});
    """
    refused = browser.execute_async_script(
        open_socket, f"{browser_server.ws_url}/ws/runs/{run_id}/?token={browser_server.outsider_token}")
    assert refused == {"code": 4403, "frames": []}
    # The signed-in superuser's session cookie opens the same stream.
    allowed = browser.execute_async_script(open_socket, f"{browser_server.ws_url}/ws/runs/{run_id}/")
    assert allowed == {"code": 1000, "frames": [
        "message.completed", "state.updated", "run.completed", "run.status"]}


def test_the_dashboard_shows_the_runtime_and_the_runs(browser, browser_server, artifacts):
    failed = browser_server.api("POST", "/api/v1/runs", json={
        "runner_id": "plugin:e2e/agent-runner-qa/failing", "input": {"text": "fail"}}).json()
    assert failed["status"] == "failed", failed
    browser.get(f"{browser_server.url}/admin/")
    dashboard = browser.find_element(By.ID, "langhost-dashboard")
    assert "ready" in browser.find_element(By.ID, "dash-runtime").text
    total = int(browser.find_element(By.CSS_SELECTOR, "#dash-total .tile-value").text)
    runs = len(browser_server.api("GET", "/api/v1/runs?page_size=100").json()["data"])
    assert total == runs >= 3
    assert browser.find_elements(By.CSS_SELECTOR, "#dash-chart rect[data-status='completed']")
    assert browser.find_elements(By.CSS_SELECTOR, "#dash-chart rect[data-status='failed']")
    failing = browser.find_element(By.ID, "dash-failing").text
    assert "plugin:e2e/agent-runner-qa/failing" in failing
    assert failed["status_reason"][:40] in failing
    # The admin's own stylesheet is served and applied (the page looks like the admin).
    header = browser.find_element(By.ID, "header")
    assert header.value_of_css_property("background-color") != "rgba(0, 0, 0, 0)"
    assert dashboard.is_displayed()
    browser.save_screenshot(str(artifacts / "dashboard.png"))


def test_swagger_ui_renders_the_api_under_the_content_security_policy(browser, browser_server):
    browser.get(f"{browser_server.url}/api/docs/")

    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#swagger-ui .opblock"),
               what="Swagger UI's operations")
    policy = browser_server.http.get("/api/docs/").headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-eval" not in policy


def test_a_runs_question_is_a_form_in_the_playground_and_its_answer_resumes_the_agent(
        browser, browser_server):
    open_playground(browser, browser_server, browser_server.confirm_agent_id)
    browser.find_element(By.ID, "playground-input").send_keys("deploy")
    browser.find_element(By.ID, "playground-send").click()

    (question,) = wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, ".chat-question"),
                             what="the question's form")
    assert "Go ahead with 'deploy'?" in question.text
    question.find_element(By.NAME, "note").send_keys("after lunch")
    question.find_element(By.CSS_SELECTOR, "button[data-action='yes']").click()

    answered = wait_until(lambda: [el.text for el in browser.find_elements(
        By.CSS_SELECTOR, ".chat-agent[data-status='completed'] .chat-text") if el.text],
        what="the answer's reply")
    assert answered[-1] == "you chose yes (after lunch)"
    assert not question.find_element(By.CSS_SELECTOR, "button[data-action='no']").is_enabled()
