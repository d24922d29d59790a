"""The HTTP request path stays on the event loop: middleware, authentication and the hot views
run there, and only database work goes to a thread."""

import asyncio
import shutil
import subprocess
import sys
import threading
import time

import httpx
import pytest
from asgiref.sync import SyncToAsync, async_to_sync, iscoroutinefunction
from django.conf import settings
from django.core.checks import run_checks
from django.db import connection
from django.test import AsyncClient
from django.test.utils import CaptureQueriesContext
from django.urls import resolve
from django.utils.deprecation import MiddlewareMixin
from django.utils.module_loading import import_string

from accounts import authentication
from runners.runtime.process import free_port
from runners.tests.langhost_process import (
    ADMIN,
    REPO,
    descendants,
    fresh_data_dir,
    langhost_env,
    manage,
    start_serve,
    wait_until_serving,
)
from tests.timing import scaled

RUN = "0b5cd1f4-0c55-4b7c-9a39-1c0f3a7d3d6e"
PROJECT, AGENT = "6f1e0f1c-8b1a-4e3f-9d59-1f4b2f3c6a10", "5e2d6c3b-7a4f-4c1e-8b2d-9c0a1e2f3b4c"


def thread_hops_of(monkeypatch, request):
    """The functions sent to a thread while `request()` (async) is served."""
    sent = []
    made = SyncToAsync.__init__

    def recording(self, func, *args, **kwargs):
        sent.append(func)
        made(self, func, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__init__", recording)
    async_to_sync(request)()
    return sent


def middleware_hops(hops):
    return [hop for hop in hops if isinstance(getattr(hop, "__self__", None), MiddlewareMixin)]


def test_every_middleware_is_async_capable():
    for path in settings.MIDDLEWARE:
        assert import_string(path).async_capable, path


def test_middleware_sends_nothing_to_a_thread_for_an_api_request(jwt_client, user, login,
                                                                  monkeypatch):
    token = login(user.email)["access_token"]
    client = AsyncClient(headers={"Authorization": f"Bearer {token}"})

    hops = thread_hops_of(monkeypatch, lambda: client.get("/api/v1/runners"))

    assert middleware_hops(hops) == []
    assert hops, "the list itself is read in a thread"


def test_django_middleware_as_is_would_send_its_hooks_to_a_thread(settings, user, login,
                                                                  monkeypatch):
    settings.MIDDLEWARE = ["django.middleware.security.SecurityMiddleware"]
    token = login(user.email)["access_token"]
    client = AsyncClient(headers={"Authorization": f"Bearer {token}"})

    hops = thread_hops_of(monkeypatch, lambda: client.get("/api/v1/runners"))

    assert [hop.__name__ for hop in middleware_hops(hops)] == ["process_request",
                                                               "process_response"]


@pytest.mark.parametrize("path", [
    "/api/v1/runs", f"/api/v1/runs/{RUN}", f"/api/v1/runs/{RUN}/events", "/api/v1/runners",
    f"/api/v1/projects/{PROJECT}/agents/{AGENT}/conversations/c1/messages",
    "/api/v1/system/debug/plugin/action",
])
def test_hot_endpoints_are_async_views(path):
    assert iscoroutinefunction(resolve(path).func), path


def user_queries(queries) -> list[str]:
    return [query["sql"] for query in queries if 'FROM "accounts_user"' in query["sql"]]


def test_a_token_loads_its_user_once_then_from_memory(jwt_client, user):
    client = jwt_client(user)
    with CaptureQueriesContext(connection) as first:
        assert client.get("/api/v1/auth/me").status_code == 200
    with CaptureQueriesContext(connection) as second:
        assert client.get("/api/v1/auth/me").status_code == 200

    assert len(user_queries(first.captured_queries)) == 1
    assert user_queries(second.captured_queries) == []


def test_a_password_changed_by_another_process_revokes_tokens_once_the_cache_expires(
        jwt_client, user, django_user_model, monkeypatch):
    client = jwt_client(user)
    assert client.get("/api/v1/auth/me").status_code == 200
    # As another process would: no signal reaches this one.
    django_user_model.objects.filter(pk=user.pk).update(password="md5$other$0123")

    still_cached = client.get("/api/v1/auth/me").status_code
    later = time.monotonic() + authentication.USER_CACHE_SECONDS + 1
    monkeypatch.setattr(authentication, "monotonic", lambda: later)
    expired = client.get("/api/v1/auth/me").status_code

    assert (still_cached, expired) == (200, 401)


def test_a_new_token_works_at_once_after_a_password_change_elsewhere(jwt_client, user,
                                                                     django_user_model):
    assert jwt_client(user).get("/api/v1/auth/me").status_code == 200  # the user is cached
    user.set_password("A-new-Passw0rd-43")
    django_user_model.objects.filter(pk=user.pk).update(password=user.password)

    fresh = jwt_client(user, password="A-new-Passw0rd-43")

    assert fresh.get("/api/v1/auth/me").status_code == 200


@pytest.mark.e2e
def test_serve_starts_the_runtime_before_any_request(tmp_path):
    plugins = tmp_path / "plugins"
    shutil.copytree(REPO / "tests/fixtures/plugins/e2e__agent-runner-qa",
                    plugins / "e2e__agent-runner-qa")
    data_dir = fresh_data_dir(tmp_path / "data")
    port = free_port()
    langhost = start_serve(data_dir, plugins, port)
    try:
        give_up = time.monotonic() + scaled(30)
        while len(descendants(langhost.pid)) < 2:  # the runtime and its plugin
            assert time.monotonic() < give_up, "no runtime started"
            time.sleep(0.05)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=scaled(30)) as http:
            token = wait_until_serving(http, langhost)
            # Discovered by itself: no run asked for it.
            while "plugin:e2e/agent-runner-qa/default" not in {
                    runner["id"] for runner in http.get(
                        "/api/v1/runners?available=true",
                        headers={"Authorization": f"Bearer {token}"}).json()["data"]}:
                assert time.monotonic() < give_up, "the plugin's runner was never listed"
                time.sleep(0.1)
    finally:
        langhost.terminate()
        langhost.wait(timeout=scaled(30))


def test_the_deploy_check_still_sees_what_the_security_middleware_needs(settings):
    settings.SECURE_HSTS_SECONDS = 0

    messages = deploy_check_ids()

    assert "security.W004" in messages  # HSTS, checked as Django checks it


def test_the_deploy_check_reports_a_missing_security_middleware(settings):
    settings.MIDDLEWARE = [path for path in settings.MIDDLEWARE
                           if not path.endswith("SecurityMiddleware")]

    assert "langhost.W001" in deploy_check_ids()


def deploy_check_ids() -> set[str]:
    return {message.id for message in run_checks(include_deployment_checks=True)
            if not message.is_silenced()}


@pytest.mark.e2e
def test_serve_exits_with_the_reason_when_its_database_cannot_be_prepared(tmp_path):
    env = langhost_env(tmp_path / "data", tmp_path / "plugins",
                       DATABASE_URL=f"sqlite:///{tmp_path}/missing/dir/langhost.sqlite3")

    served = manage("serve", "--port", str(free_port()), env=env)

    assert served.returncode == 1
    assert "LangHost could not start" in served.stderr


def serve_one(handler, path: str) -> int:
    """One GET through `handler` (LangHost's ASGI handler); the response status."""
    sent, body = [], [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive():
        if body:
            return body.pop()
        await asyncio.Event().wait()  # the client stays: no disconnect

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "headers": [(b"host", b"localhost")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    async_to_sync(handler)(scope, receive, send)
    return sent[0]["status"]


def test_sync_views_have_a_kept_thread_each_and_async_views_none(transactional_db):
    from django.core.signals import request_started

    from langhost.handlers import ASGIHandler

    seen = []

    def record(**kwargs):
        try:
            on_loop = asyncio.get_running_loop() is not None
        except RuntimeError:
            on_loop = False
        seen.append((threading.current_thread().name, on_loop))

    handler = ASGIHandler()
    request_started.connect(record)
    try:
        for path in ["/api/v1/auth/me", "/admin/login/", "/api/v1/runs", "/api/v1/runners"]:
            serve_one(handler, path)
    finally:
        request_started.disconnect(record)

    sync_views, async_views = seen[:2], seen[2:]
    assert [on_loop for _, on_loop in sync_views] == [False, False]
    assert all(name.startswith("langhost-request") for name, _ in sync_views)
    assert len({name for name, _ in sync_views}) == 1  # the same thread, kept, not made anew
    assert [on_loop for _, on_loop in async_views] == [True, True]  # no hop to a thread


@pytest.mark.e2e
def test_serve_on_a_fresh_data_dir_starts_without_an_error(tmp_path):
    plugins = tmp_path / "plugins"
    shutil.copytree(REPO / "tests/fixtures/plugins/e2e__agent-runner-qa",
                    plugins / "e2e__agent-runner-qa")
    port = free_port()
    env = langhost_env(tmp_path / "data", plugins, LANGHOST_ADMIN_EMAIL=ADMIN["email"],
                       LANGHOST_ADMIN_PASSWORD=ADMIN["password"])
    langhost = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port)],
                                cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=scaled(30)) as http:
            wait_until_serving(http, langhost)  # the database was migrated meanwhile
    finally:
        langhost.terminate()
        _, logged = langhost.communicate(timeout=scaled(30))

    assert "Traceback" not in logged and " ERROR " not in logged.replace("[ERROR]", ""), logged
