"""A route's request body read straight from the ASGI messages (`read_body`) and its headers read in one pass
(`header_values`): the pieces joined, the limit kept before and during the read, a disconnect the client's error."""

from __future__ import annotations

import pytest
from starlette.requests import Request
from starlette.types import Message

from tito.server.errors import BodyTooLargeError, ClientDisconnectedError
from tito.server.replies import header_values, read_body


def request(messages: list[Message], headers: list[tuple[bytes, bytes]] | None = None) -> Request:
    """A request whose receive gives `messages` in order (and fails past them: nothing more may be read)."""
    pending = iter(messages)

    async def receive() -> Message:
        return next(pending)

    return Request({"type": "http", "method": "POST", "headers": headers or []}, receive)


def piece(body: bytes, more: bool) -> Message:
    return {"type": "http.request", "body": body, "more_body": more}


@pytest.mark.asyncio
async def test_a_body_in_pieces_is_joined_and_a_whole_one_is_the_message_s_own_bytes() -> None:
    assert await read_body(request([piece(b'{"a"', True), piece(b"", True), piece(b": 1}", False)]), 100) == b'{"a": 1}'
    whole = b'{"messages": []}'
    assert await read_body(request([piece(whole, False)]), 100) is whole


@pytest.mark.asyncio
async def test_a_body_past_the_limit_is_refused_before_it_is_read_when_declared_else_once_it_passes() -> None:
    with pytest.raises(BodyTooLargeError, match="is 11 bytes; this server accepts at most 10"):
        await read_body(request([], [(b"host", b"t"), (b"content-length", b"11")]), 10)  # nothing received
    with pytest.raises(BodyTooLargeError, match="over 10 bytes"):
        await read_body(request([piece(b"123456", True), piece(b"789012", True)]), 10)  # no third receive
    assert await read_body(request([piece(b"1234567890", False)], [(b"content-length", b"10")]), 10) == b"1234567890"


@pytest.mark.asyncio
async def test_a_client_that_leaves_mid_body_is_a_client_disconnect() -> None:
    with pytest.raises(ClientDisconnectedError, match="ended after 3 bytes"):
        await read_body(request([piece(b"abc", True), {"type": "http.disconnect"}]), 100)


def test_header_values_are_by_name_with_a_repeated_header_s_first_value_as_starlette_gives_it() -> None:
    headers = [(b"x-stainless-retry-count", b"0"), (b"thread-id", b"t\xe9"), (b"x-stainless-retry-count", b"2")]
    values = header_values(request([], headers))
    assert values == {"x-stainless-retry-count": "0", "thread-id": "t\u00e9"}
    assert all(values[name] == request([], headers).headers[name] for name in values)
