"""A stdio MCP server's stderr: each line logged under the server's name, the last few kept to
say why the server failed (the SDK would send them to LangHost's own terminal only)."""

import asyncio
import collections
import contextlib
import logging
import os

LINES, LINE_CHARS = 10, 500
# After the server stopped, how long its stderr may stay open (a grandchild still holding it).
EOF_WAIT_SECONDS = 1.0

logger = logging.getLogger("runners.tools.mcp.stderr")


class StderrTail(asyncio.Protocol):
    """Reads a pipe on the running loop; `pipe()` gives its write end for the child."""

    def __init__(self, name: str):
        self.name = name
        self.lines: collections.deque[str] = collections.deque(maxlen=LINES)
        self._partial = b""
        self._closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        *complete, self._partial = (self._partial + data).split(b"\n")
        self._partial = self._partial[-4 * LINE_CHARS:]  # a line without end stays bounded
        for raw in complete:
            self._keep(raw)

    def connection_lost(self, exc) -> None:
        self._keep(self._partial)
        self._partial = b""
        if not self._closed.done():
            self._closed.set_result(None)

    def _keep(self, raw: bytes) -> None:
        line = raw.decode(errors="replace").rstrip()[:LINE_CHARS]
        if line:
            self.lines.append(line)
            logger.info("MCP server %s: %s", self.name, line)

    def note(self) -> str:
        """What an error adds: the last lines, if the server wrote any."""
        return ". Its stderr ended with:\n" + "\n".join(self.lines) if self.lines else ""

    @contextlib.asynccontextmanager
    async def pipe(self):
        """The write end, as a file for the child's stderr; on exit, the rest is read (until
        the child's copy closes, or EOF_WAIT_SECONDS)."""
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w")
        try:
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: self, os.fdopen(read_fd, "rb", buffering=0))
        except BaseException:
            errlog.close()
            os.close(read_fd)
            raise
        try:
            yield errlog
        finally:
            errlog.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(EOF_WAIT_SECONDS):
                    await asyncio.shield(self._closed)
            transport.close()
