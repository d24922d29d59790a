"""The SDK's stdio connection to the runtime, sending small messages without a thread hop.

The SDK encodes every outgoing message in a worker thread so a huge one cannot stall the
event loop. A run's messages are a few KiB: encoding one takes microseconds, the hop to the
thread and back (under the send lock, which every other sender then waits on) far longer.
Messages over one chunk still take the SDK's path, chunked as the runtime expects.
"""

from langbot_plugin.entities.io.errors import ConnectionClosedError
from langbot_plugin.runtime.io.connections import stdio


class StdioConnection(stdio.StdioConnection):
    async def send(self, message: str) -> None:
        # A character is 1-4 bytes: longer than this may need chunks, decided by the SDK.
        if len(message) * 4 > self.chunk_size:
            return await super().send(message)
        async with self._send_lock:
            self._first_message_send_inline = False
            try:
                self.stdin.write(message.encode("utf-8") + b"\n")
                await self.stdin.drain()
            except Exception as exc:
                raise ConnectionClosedError("Connection closed during send") from exc
