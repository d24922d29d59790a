"""The SDK's sandbox box server (`lbp box`), a child of this process driven over stdio, as
the plugin runtime is.

- Used for the SDK's backends only (`LANGHOST_BOX_BACKEND`: `host-unsafe`, the SDK's `host`,
  runs commands as this machine's user and isolates nothing: the log, every admin page and
  `/healthz` say so; `nsjail`, `docker`, `e2b` where they are installed); LangHost's own
  `sandbox` backend needs no server (`services.py`). Started on first use. Its HTTP side
  binds 127.0.0.1 only.
- It dies with LangHost (PR_SET_PDEATHSIG) and is stopped with it (`stop()`).
- If it dies, the calls in flight fail (ConnectionClosedError, said to whoever asked) and the
  next call starts a fresh one.
- Its environment holds nothing of LangHost's secrets: the usual allow-list, and the box's
  own settings (the trusted instance id, where file transfers go, the backend).
"""

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections import deque
from pathlib import Path

from django.conf import settings
from langbot_plugin.box.client import ActionRPCBoxClient
from langbot_plugin.entities.io.actions.enums import CommonAction
from langbot_plugin.entities.io.context import ActionContext
from langbot_plugin.runtime.io.handler import Handler

from runners.runtime.process import (
    die_with_parent,
    free_port,
    kill_group,
    runtime_environment,
    stop_runtime,
)
from runners.runtime.stdio import StdioConnection

logger = logging.getLogger(__name__)

INSTANCE = "langhost"
START_TIMEOUT_SECONDS = 60.0
LOG_LINES = 50


# LangHost's names for the SDK's backends: its `host` only under a name that says what it is.
SDK_BACKENDS = {"host-unsafe": "host", "nsjail": "nsjail", "docker": "docker", "e2b": "e2b"}


class BoxUnavailable(RuntimeError):
    pass


class BoxServer:
    def __init__(self, box_dir: Path, backend: str):
        self.box_dir = box_dir
        self.backend = backend
        self.process: asyncio.subprocess.Process | None = None
        self.client: ActionRPCBoxClient | None = None
        self.started_at: float | None = None
        self.starts = 0
        self.last_error = ""
        self.log_tail: deque[str] = deque(maxlen=LOG_LINES)
        self._lock: asyncio.Lock | None = None
        self._tasks: list[asyncio.Task] = []

    def context(self, workspace: str) -> ActionContext:
        """The box's tenant context for a LangHost workspace (a project)."""
        return ActionContext(instance_uuid=INSTANCE, workspace_uuid=workspace,
                             placement_generation=1)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def ready(self) -> ActionRPCBoxClient:
        """The client of a running box server, started (again) if need be."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.running or self.client is None:
                await self._start()
            return self.client

    async def _start(self) -> None:
        await self.stop()
        self.box_dir.mkdir(parents=True, exist_ok=True)
        env = runtime_environment(str(self.box_dir)) | {
            "LANGBOT_BOX_TRUSTED_INSTANCE_UUID": INSTANCE,
            "LANGBOT_PLUGIN_FILE_STORAGE_DIR": str(self.box_dir / "transfers"),
            "LANGBOT_BOX_CONFIG": json.dumps({"backend": self.backend}),
        }
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "langbot_plugin.cli.__init__", "box", "-s", "--host",
            "127.0.0.1", "--ws-control-port", str(free_port()),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=self.box_dir, env=env,
            start_new_session=True, preexec_fn=die_with_parent(os.getpid()),
            limit=1024 * 1024)
        self.starts += 1
        self._tasks = [asyncio.create_task(self._read_log(self.process.stderr))]
        connection = StdioConnection(self.process.stdout, self.process.stdin,
                                     process=self.process, reserve_first_message_decode=True,
                                     reserve_first_message_send=True)
        handler = Handler(connection, file_storage_dir=str(self.box_dir / "host-transfers"))
        self._tasks.append(asyncio.create_task(handler.run()))
        client = ActionRPCBoxClient(logger)
        client.set_handler(handler)
        try:
            async with asyncio.timeout(START_TIMEOUT_SECONDS):
                await handler.call_action(CommonAction.PING, {})
                await client.init({"backend": self.backend})
        except Exception as exc:
            self.last_error = f"the box server did not start: {type(exc).__name__}: {exc}"
            await self.stop()
            raise BoxUnavailable(self.last_error) from None
        if self.backend == "host":
            logger.warning("the box runs commands with the host-unsafe backend: as this "
                           "machine's user, isolated from nothing (LANGHOST_BOX_BACKEND=sandbox "
                           "isolates)")
        self.client, self.started_at, self.last_error = client, time.time(), ""

    async def _read_log(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            text = line.decode(errors="replace").rstrip()
            self.log_tail.append(text)
            logger.debug("box: %s", text)

    async def stop(self) -> None:
        process, self.process, self.client = self.process, None, None
        if process is not None:
            if process.returncode is not None and not self.last_error:
                self.last_error = f"the box server exited with code {process.returncode}"
            await stop_runtime(process)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []

    def kill(self) -> None:
        """SIGKILL the box server now (what a crash does), from any thread."""
        if self.process is not None:
            kill_group(self.process.pid)

    def status(self) -> dict:
        return {"backend": self.backend, "running": self.running,
                "pid": self.process.pid if self.running else None,
                "started_at": self.started_at, "starts": self.starts,
                "last_error": self.last_error, "log_tail": list(self.log_tail)}


_servers: dict[asyncio.AbstractEventLoop, BoxServer] = {}


def box_server() -> BoxServer:
    """This event loop's box server (its pipes belong to the loop that started it). One left
    by a loop that has closed is killed: nothing can stop it in order any more."""
    loop = asyncio.get_running_loop()
    for closed in [other for other in _servers if other.is_closed()]:
        _servers.pop(closed).kill()
    server = _servers.get(loop)
    box_dir = Path(settings.DATA_DIR) / "box"
    if server is None or server.box_dir != box_dir:
        server = _servers[loop] = BoxServer(
            box_dir, SDK_BACKENDS.get(settings.LANGHOST_BOX_BACKEND, "none"))
    return server


async def stop_box_server() -> None:
    """Stop this event loop's box server, if it started one (LangHost is stopping)."""
    server = _servers.pop(asyncio.get_running_loop(), None)
    if server is not None:
        await server.stop()


def status() -> dict:
    """What the runtime page shows: each box server of this process."""
    servers = [server.status() for server in _servers.values()]
    found = servers[0] if servers else {"running": False, "starts": 0, "last_error": "",
                                        "log_tail": []}
    return {**found, "backend": settings.LANGHOST_BOX_BACKEND}
