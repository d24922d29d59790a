"""Shared fixtures of every test (the apps' and tests/'): people, API clients, JWTs and
factories for projects and agents."""

import contextlib
import importlib
import itertools
import platform
import sys

import pytest
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.contrib.auth.models import Permission
from django.db import connections
from drf_spectacular.contrib.django_filters import DjangoFilterExtension
from rest_framework.test import APIClient

from runners.plugins import events
from runners.runtime.sandbox import confinement
from tests.timing import time_factor

PASSWORD = "Sturdy-Passw0rd-42"

_counter = itertools.count(1)


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    """Production-strength hashing costs a tenth of a second per user; tests do not need it
    (accounts/tests/test_password_hashing.py checks it)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fresh_sync_thread_connections():
    """After each test, the connections of asgiref's one sync thread (where async code's
    database work runs) are closed, as pytest-django closes the test thread's own. A test that
    left a cursor of that thread open (in an exception it kept) would otherwise leave its
    connection on an old snapshot of the database, and every later write from that thread
    would fail at once with "database is locked"."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture(autouse=True)
def artifact_storage(settings, tmp_path):
    """Artifacts of a test go to its own temp dir, never the real data dir."""
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                      "OPTIONS": {"location": str(tmp_path / "artifacts")}},
    }
    return tmp_path / "artifacts"


@pytest.fixture(autouse=True)
def no_listening_plugins_of_an_earlier_test():
    """Which plugins listen to runs is cached for a moment; a test's database starts without
    the plugins an earlier one discovered."""
    events.forget_listening_plugins()


@pytest.fixture
def password():
    return PASSWORD


@pytest.fixture
def make_user(db, django_user_model):
    def make(email=None, password=PASSWORD, superuser=False, **fields):
        email = email or f"user{next(_counter)}@example.com"
        if superuser:
            return django_user_model.objects.create_superuser(email=email, password=password, **fields)
        return django_user_model.objects.create_user(email=email, password=password, **fields)

    return make


@pytest.fixture
def make_staff(make_user):
    """A staff member holding only the permissions named (by codename)."""
    def make(*codenames):
        staff = make_user(is_staff=True)
        staff.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
        return staff

    return make


@pytest.fixture
def superuser(make_user):
    return make_user("admin@example.com", superuser=True)


@pytest.fixture
def user(make_user):
    return make_user("alice@example.com", first_name="Alice", last_name="Liddell")


@pytest.fixture
def outsider(make_user):
    return make_user("mallory@example.com")


def _client_for(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def anon_client(db):
    return APIClient()


@pytest.fixture
def superuser_client(superuser):
    return _client_for(superuser)


@pytest.fixture
def user_client(user):
    return _client_for(user)


@pytest.fixture
def outsider_client(outsider):
    return _client_for(outsider)


@pytest.fixture
def member(make_user, project):
    """Bob: a member of Alice's project (`project`), who owns none of her conversations."""
    bob = make_user("bob@example.com")
    project.members.add(bob)
    return bob


@pytest.fixture
def member_client(member):
    return _client_for(member)


@pytest.fixture
def login():
    """`login(email, password)` -> the token pair from `POST /api/v1/auth/login`."""

    def do_login(email, password=PASSWORD):
        response = APIClient().post(
            "/api/v1/auth/login", {"email": email, "password": password}, format="json"
        )
        assert response.status_code == 200, response.content
        return response.json()

    return do_login


@pytest.fixture
def jwt_client(login):
    """`jwt_client(user_or_access_token)` -> an APIClient sending `Authorization: Bearer ...`."""

    def make(who, password=PASSWORD):
        token = who if isinstance(who, str) else login(who.email, password)["access_token"]
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return client

    return make


@pytest.fixture
def make_project(db):
    def make(owner, name=None, slug=None, members=(), **fields):
        from accounts.models import Membership, Project

        n = next(_counter)
        project = Project.objects.create(
            owner=owner, name=name or f"Project {n}", slug=slug or f"project-{n}", **fields
        )
        for member in members:
            Membership.objects.create(project=project, user=member)
        return project

    return make


@pytest.fixture
def project(make_project, user):
    """A project owned by `user`."""
    return make_project(user, name="Apollo", slug="apollo")


@pytest.fixture
def make_agent_type(db):
    def make(**fields):
        from runners.models import AgentType

        n = next(_counter)
        fields.setdefault("name", f"Agent type {n}")
        fields.setdefault("slug", f"agent-type-{n}")
        return AgentType.objects.create(**fields)

    return make


@pytest.fixture
def agent_type(make_agent_type):
    return make_agent_type(
        name="Reviewer", slug="reviewer", expertise=["python"], primary_model="gpt-4o"
    )


@pytest.fixture
def make_agent(db):
    def make(project, agent_type, name=None, status=None, **fields):
        from runners.models import AgentInstance

        fields.setdefault("name", name or f"agent-{next(_counter)}")
        if status:
            fields["status"] = status
        return AgentInstance.objects.create(project=project, agent_type=agent_type, **fields)

    return make


@pytest.fixture
def agent(make_agent, project, agent_type):
    """An idle agent in `project`."""
    return make_agent(project, agent_type, name="Ada")


# A test that starts a process (the runtime, daphne, a command, an MCP server, a browser) says
# so on its file: `pytestmark = pytest.mark.processes` (or e2e, browser, cluster). The in-process
# tier (`make test-fast`) runs only the others; a test that starts a process unmarked fails,
# naming it, so the tier stays in-process as tests are added.
PROCESS_MARKS = ("processes", "e2e", "browser", "cluster")
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty"})


class _ProcessWatch:
    """The test now running, and what it started (a Python audit hook sees every start)."""

    item: pytest.Item | None = None
    started: list[str] = []

    @classmethod
    def audit(cls, event: str, args: tuple) -> None:
        if event in PROCESS_EVENTS and cls.item is not None:
            argv = args[1] if event == "subprocess.Popen" else args[1:2]
            cls.started.append(f"{event}: {' '.join(map(str, argv or args[:1]))[:300]}")


sys.addaudithook(_ProcessWatch.audit)


def pytest_sessionstart(session):
    """The sandbox is probed once a process (`python -c pass` confined, runners/runtime/
    sandbox.py), by whatever asks first; here, before any test, so that no in-process test that
    renders the confinement banner is taken for one that starts processes. The same for
    `uname -p`, which the stdlib runs once for the model SDKs' platform headers, and for
    drf-spectacular's one look for GDAL (`ldconfig`, `gcc`), made the first time a schema
    describes a filter, and for trio's (`ldconfig`), which the model SDKs' HTTP transport
    imports when a provider is first called."""
    confinement(settings.LANGHOST_PLUGIN_SANDBOX)
    platform.processor()
    DjangoFilterExtension._is_gis(None)
    with contextlib.suppress(ImportError):
        importlib.import_module("trio")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    unmarked = not any(item.get_closest_marker(mark) for mark in PROCESS_MARKS)
    _ProcessWatch.item, _ProcessWatch.started = (item if unmarked else None), []
    try:
        return (yield)
    finally:
        _ProcessWatch.item = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if _ProcessWatch.item is item and _ProcessWatch.started and report.passed:
        started, _ProcessWatch.started = _ProcessWatch.started, []
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} started a process without a mark saying so; add "
            f"`pytestmark = pytest.mark.processes` to its file (conftest.py):\n  "
            + "\n  ".join(started))
    return report


SLOW_SECONDS = 20


@pytest.hookimpl(trylast=True)  # after pytest-django's own ordering
def pytest_collection_modifyitems(config, items):
    """The files holding a `slow` test go first, the longest (`slow(why, seconds=...)`) first
    of all: spread across the cores (`--dist=loadfile`, scopes kept in this order by
    `--no-loadscope-reorder`), they start while the many short files still fill the other
    cores, not last and alone."""
    expected: dict = {}
    for item in items:
        if mark := item.get_closest_marker("slow"):
            seconds = mark.kwargs.get("seconds", SLOW_SECONDS)
            expected[item.path] = max(expected.get(item.path, 0), seconds)
    items.sort(key=lambda item: -expected.get(item.path, 0))


_unmarked_slow: list[str] = []


def pytest_runtest_logreport(report):
    if report.when == "call" and report.duration > SLOW_SECONDS and "slow" not in report.keywords:
        _unmarked_slow.append(f"{report.nodeid} ({report.duration:.0f} s)")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """A failed run says how its waits were scaled, and how to scale them; a test past
    `SLOW_SECONDS` with no `slow` mark saying why is named."""
    for nodeid in _unmarked_slow:
        terminalreporter.write_line(f"slow with no `slow` mark saying why: {nodeid}", yellow=True)
    if terminalreporter.stats.get("failed") or terminalreporter.stats.get("error"):
        terminalreporter.write_line(
            f"Tests wait up to {time_factor():.1f}x their limits here (tests/timing.py). On a "
            f"busy or slow machine, a test that timed out may pass with the limits raised: "
            f"LANGHOST_TEST_TIME_FACTOR=3 make test.", yellow=True)
