"""Stored files as response bodies, sent a block at a time."""

import asyncio

from django.http import FileResponse

BLOCK_SIZE = 64 * 1024


def file_response(file, content_type: str) -> FileResponse:
    """`file`'s bytes as the body, read as the client takes them; the response closes `file`.

    Daphne serves responses asynchronously, and Django reads a synchronous body (a plain
    FileResponse's) whole into memory before sending any of it; this body is asynchronous, its
    blocks read in a thread. FileResponse still sets Content-Length from the file.
    """
    response = FileResponse(file, content_type=content_type)
    response.streaming_content = _blocks(file)
    return response


async def _blocks(file):
    while block := await asyncio.to_thread(file.read, BLOCK_SIZE):
        yield block
