"""`manage.py serve` refuses a body past its limit before reading it: as soon as the declared
length says so, or as a chunked body passes it; a caller with no credentials may send the
anonymous limit, a signed-in one the upload limit. The refusal is a JSON 413."""

import json
import socket

import httpx
import pytest

from runners.runtime.process import free_port
from runners.tests.langhost_process import fresh_data_dir, start_serve, wait_until_serving
from tests.timing import scaled

pytestmark = pytest.mark.e2e

LOGIN = "/api/v1/auth/login"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("limits")
    port = free_port()
    process = start_serve(fresh_data_dir(data / "data"), data / "plugins", port)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=scaled(30)) as http:
            token = wait_until_serving(http, process)
        yield port, token
    finally:
        process.terminate()
        process.wait(timeout=scaled(30))


def exchange(port: int, head: str, body: bytes = b"") -> tuple[int, dict]:
    """What the server answers to `head` and `body`, sent raw (no more of the body follows)."""
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(10)) as connection:
        connection.sendall(head.encode() + b"\r\n" + body)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def test_an_anonymous_body_declared_too_large_is_refused_unread(server):
    port, _ = server
    head = (f"POST {LOGIN} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {34 * 2**20}\r\n")

    status, body = exchange(port, head)  # the 34 MiB never come: answered all the same

    assert status == 413 and "65536 bytes" in body["detail"]


def test_a_chunked_anonymous_body_is_refused_once_past_the_limit(server):
    port, _ = server
    head = (f"POST {LOGIN} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n")
    chunk = b"%x\r\n%s\r\n" % (40_000, b" " * 40_000)

    status, body = exchange(port, head, chunk * 2)

    assert status == 413 and "upload limit" in body["detail"]


def test_a_signed_in_caller_may_send_more_than_the_anonymous_limit(server):
    port, token = server
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=scaled(30)) as http:
        answer = http.post("/api/v1/projects", json={"name": "x" * 100_000, "slug": "big"},
                           headers={"Authorization": f"Bearer {token}"})
        declared = exchange(port, f"POST /api/v1/projects HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  f"Authorization: Bearer {token}\r\n"
                                  f"Content-Length: {2**40}\r\n")

    assert answer.status_code == 400 and "name" in answer.json()["errors"]  # read, and judged
    assert declared[0] == 413
