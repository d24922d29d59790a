"""The SDK's stdio connection, with what it costs per frame cut for small frames.

For every frame the SDK's `StdioConnection` encodes in a thread and reads a line through two
tasks (the read and a watch on the runtime's exit). A run sends one frame and reads a few, and
each such hand-over costs more than the frame: `LoopStdioConnection` sends a frame that needs no
chunking straight from the loop, and reads lines directly, its one watch on the runtime's exit
ending the stream so that a read never outlives the runtime. Chunked frames (large ones) go the
SDK's way.
"""

import asyncio

from langbot_plugin.entities.io.errors import ConnectionClosedError
from langbot_plugin.runtime.io.connections.stdio import StdioConnection

UTF8_MAX_BYTES_PER_CHAR = 4


class LoopStdioConnection(StdioConnection):
    async def send(self, message: str) -> None:
        if len(message) * UTF8_MAX_BYTES_PER_CHAR > self.chunk_size:
            await super().send(message)  # may need chunks
            return
        async with self._send_lock:
            self._first_message_send_inline = False
            try:
                self.stdin.write(message.encode("utf-8") + b"\n")
                await self.stdin.drain()
            except Exception:
                raise ConnectionClosedError("Connection closed during send") from None

    async def _read_single_line(self) -> str:
        if self.process is not None and self._process_exit_task is None:
            self._process_exit_task = asyncio.create_task(self._end_stream_on_exit())
        line = await self.stdout.readline()
        if not line:
            raise ConnectionClosedError("The runtime's output ended.")
        return line.decode().strip()

    async def _end_stream_on_exit(self) -> None:
        await self.process.wait()
        self.stdout.feed_eof()  # a pending read ends now, even if another process holds the pipe
