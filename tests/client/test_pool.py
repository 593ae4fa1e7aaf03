"""`SessionPool` and `AsyncSessionPool` over real tito servers: sessions spread by load and stay on their server,
a server that stops answering has its sessions reported lost while the others go on, and no call outlives its
deadline."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import openai
import pytest

from tests.server.conftest import Server, running_server
from tito.client import (
    AsyncSessionPool,
    DeadlineExceededError,
    Lost,
    Samples,
    SessionHandle,
    SessionLostError,
    SessionPool,
)
from tito.tokenizer_loading import LocalTokenizer


@pytest.fixture
def two_servers(qwen3_tokenizer: LocalTokenizer) -> Iterator[tuple[contextlib.ExitStack, list[Server]]]:
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running_server(qwen3_tokenizer)) for _ in range(2)]
        yield stack, servers


def run_turns(handle: SessionHandle, turns: int) -> list[str]:
    """An agent on the session's own server URL: `turns` turns, each resending the whole conversation."""
    agent = openai.OpenAI(base_url=handle.openai_base_url, api_key="x", max_retries=0)
    messages: list[dict[str, str]] = []
    ids = []
    for number in range(turns):
        messages.append({"role": "user", "content": f"step {number}"})
        reply = agent.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        ids.append(reply.id)
    return ids


def test_sessions_spread_over_the_servers_and_each_stays_on_its_own(
    two_servers: tuple[contextlib.ExitStack, list[Server]],
) -> None:
    _, servers = two_servers
    with SessionPool([server.url for server in servers], poll_every_s=0.0) as pool:
        handles = [pool.create_session(group_id="g") for _ in range(10)]
        replies = {handle.session_id: run_turns(handle, 2) for handle in handles}
        samples = pool.collect(replies, rewards={sid: {ids[-1]: 1.0} for sid, ids in replies.items()})
    by_server = {server.url: {h.session_id for h in handles if h.server_url == server.url} for server in servers}
    assert [len(ids) for ids in by_server.values()] == [5, 5]
    for server in servers:
        assert {session.session_id for session in server.state.registry} == by_server[server.url]
    for session_id, got in samples.items():
        assert isinstance(got, Samples)
        [sample] = got.samples
        assert [span["response_id"] for span in sample["spans"]] == replies[session_id]
        assert sample["reward"] == 1.0


def test_a_server_that_stops_answering_has_its_sessions_reported_lost_and_the_others_go_on(
    two_servers: tuple[contextlib.ExitStack, list[Server]], qwen3_tokenizer: LocalTokenizer
) -> None:
    _, servers = two_servers
    with contextlib.ExitStack() as doomed_stack:
        doomed = doomed_stack.enter_context(running_server(qwen3_tokenizer))
        urls = [servers[0].url, doomed.url]
        pool = SessionPool(urls, poll_every_s=0.0, dead_after_s=0.5, deadline_s=2.0)
        handles = [pool.create_session() for _ in range(6)]
        for handle in handles:
            run_turns(handle, 1)
    # the doomed server has stopped: connections are refused
    started = time.monotonic()
    lost = pool.check(deadline_s=0.3)
    lost += pool.check(deadline_s=0.3) if not lost else []
    time.sleep(0.5)
    lost += pool.check(deadline_s=0.3)
    on_doomed = {h.session_id for h in handles if h.server_url == doomed.url}
    assert {record.session_id for record in lost} == on_doomed and len(on_doomed) == 3
    assert time.monotonic() - started < 3.0
    results = pool.collect([h.session_id for h in handles], deadline_s=3.0)
    assert {sid for sid, got in results.items() if isinstance(got, Lost)} == on_doomed
    assert all(isinstance(got, Samples) for sid, got in results.items() if sid not in on_doomed)
    with pytest.raises(SessionLostError):
        pool.samples(next(iter(on_doomed)))
    assert pool.create_session().server_url == servers[0].url
    pool.close()


def test_no_pool_call_outlives_its_deadline_when_a_server_never_answers(server: Server, silent_url: str) -> None:
    with SessionPool([silent_url, server.url], poll_every_s=0.0, deadline_s=1.0) as pool:
        started = time.monotonic()
        handle = pool.create_session()
        created_in = time.monotonic() - started
        pool.placement.place("stuck", silent_url)
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            pool.samples("stuck", deadline_s=0.5)
        stuck_for = time.monotonic() - started
    assert handle.server_url == server.url and created_in < 1.5, created_in
    assert 0.4 <= stuck_for < 1.2, stuck_for


@pytest.mark.asyncio
async def test_the_async_pool_spreads_concurrent_creates_and_collects(
    two_servers: tuple[contextlib.ExitStack, list[Server]],
) -> None:
    _, servers = two_servers
    async with AsyncSessionPool([server.url for server in servers], poll_every_s=0.0) as pool:
        handles = list(await asyncio.gather(*(pool.create_session() for _ in range(8))))
        await asyncio.to_thread(lambda: [run_turns(handle, 1) for handle in handles])
        results = await pool.collect(handle.session_id for handle in handles)
        await pool.delete_session(handles[0].session_id)
    counts = sorted(sum(h.server_url == server.url for h in handles) for server in servers)
    assert counts == [4, 4]
    assert all(isinstance(got, Samples) and len(got.samples) == 1 for got in results.values())
