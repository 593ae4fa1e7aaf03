"""A request body the client cuts short or frames wrongly is the client's protocol error: uvicorn answers 400, the
route answers 499 (the access log's status), /metrics counts it under its own name, and nothing logs a traceback."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from tests.server.conftest import Server

BROKEN_BODIES = {
    "bad chunk size": b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
    "negative content-length": b"Content-Length: -5\r\n\r\n{}",
    "client gone mid-body": b"Content-Length: 100\r\n\r\n" + b'{"messages": [',
}


class Recorded(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logged() -> Iterator[Recorded]:
    """What tito's and uvicorn's loggers write meanwhile (uvicorn's do not propagate to the root logger)."""
    handler = Recorded()
    loggers = [logging.getLogger(name) for name in ("tito", "uvicorn.error")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    yield handler
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def send_raw(server: Server, path: str, head_and_body: bytes) -> bytes:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(
            f"POST {path} HTTP/1.1\r\nHost: tito\r\nContent-Type: application/json\r\n".encode() + head_and_body
        )
        raw.shutdown(socket.SHUT_WR)  # the client is gone after what it sent
        reply = b""
        while chunk := raw.recv(4096):
            reply += chunk
    return reply


def internal_errors(server: Server) -> float:
    lines = server.http.get("/metrics").text.splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith("tito_errors_total") and "Internal" in line)


@pytest.mark.parametrize("route", ["v1/chat/completions", "v1/messages", "v1/responses", "samples"])
@pytest.mark.parametrize("broken", list(BROKEN_BODIES))
def test_a_broken_body_is_a_client_error_logged_at_info_without_a_traceback(
    server: Server, logged: Recorded, route: str, broken: str
) -> None:
    session_id = server.new_session()
    before = internal_errors(server)
    reply = send_raw(server, f"/sessions/{session_id}/{route}", BROKEN_BODIES[broken])
    assert not reply or reply.startswith(b"HTTP/1.1 4"), reply[:80]
    time.sleep(0.2)  # the route notices the cut body after uvicorn answered
    assert internal_errors(server) == before
    loud = [record for record in logged.records if record.levelno > logging.INFO or record.exc_info]
    assert not loud, [record.getMessage() for record in loud]
    statuses = [record.getMessage() for record in logged.records if record.name == "tito.access"]
    assert not any('"status":500' in line for line in statuses), statuses
    assert server.http.get(f"/sessions/{session_id}").status_code == 200


def test_the_time_a_body_takes_to_arrive_is_waiting_on_the_client_not_tito_time(
    server: Server, logged: Recorded
) -> None:
    """An agent that writes its body slowly (a large body on a busy machine) shows it in `wait_ms`; `tito_ms` is
    what is left once the engine's and the client's times are taken out."""
    session_id = server.new_session()
    body = b'{"messages": [{"role": "user", "content": "' + b"slow " * 2000 + b'"}]}'
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        head = f"POST /sessions/{session_id}/v1/chat/completions HTTP/1.1\r\nHost: tito\r\n"
        raw.sendall(f"{head}Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        raw.sendall(body[:100])
        time.sleep(0.5)
        raw.sendall(body[100:])
        assert raw.recv(4096).startswith(b"HTTP/1.1 200")
    time.sleep(0.2)
    lines = [json.loads(r.getMessage()) for r in logged.records if r.name == "tito.access"]
    turn = next(line for line in lines if line["route"] == "/sessions/{id}/v1/chat/completions")
    assert turn["wait_ms"] >= 450, turn
    assert turn["tito_ms"] < 400 and turn["engine_ms"] >= 0, turn
