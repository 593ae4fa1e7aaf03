"""The access log's direct lines (`tito serve`'s stderr): the lines of one event-loop turn leave in one write, in
order, once that turn's callbacks ran; without a running loop a line is written at once."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from tito.server import access_log
from tito.server.access_log import DirectLines


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def counted_writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    writes: list[bytes] = []
    real_write = os.write

    def write(fd: int, data: bytes | memoryview) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(access_log.os, "write", write)
    return writes


def test_the_lines_of_one_loop_turn_leave_in_one_write_in_order(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = counted_writes(monkeypatch)
    lines = DirectLines(pipe[1], b"tito.access: ")

    async def requests_ending_together() -> None:
        lines.write(b'{"n":1}')
        lines.write(b'{"n":2}')
        assert writes == []  # not before the loop's turn is done
        await asyncio.sleep(0)
        lines.write(b'{"n":3}')  # a later turn: its own write
        await asyncio.sleep(0)

    asyncio.run(requests_ending_together())
    assert writes == [b'tito.access: {"n":1}\ntito.access: {"n":2}\n', b'tito.access: {"n":3}\n']
    assert os.read(pipe[0], 1000) == b"".join(writes)


def test_without_a_running_loop_a_line_is_written_at_once(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = counted_writes(monkeypatch)
    DirectLines(pipe[1], b"> ").write(b"{}")
    assert writes == [b"> {}\n"]
    assert os.read(pipe[0], 100) == b"> {}\n"


def test_a_write_cut_short_is_finished(pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    monkeypatch.setattr(access_log.os, "write", lambda fd, data: real_write(fd, bytes(data)[:3]))  # 3 bytes a call
    DirectLines(pipe[1], b"").write(b'{"session":"abc"}')
    assert os.read(pipe[0], 100) == b'{"session":"abc"}\n'
