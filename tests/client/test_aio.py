"""`AsyncTitoClient`: the same calls on asyncio, and its deadline cancels a call that gets no answer."""

from __future__ import annotations

import time

import openai
import pytest

from tests.server.conftest import Server
from tito.client import AsyncTitoClient, DeadlineExceededError, SessionGoneError


@pytest.mark.asyncio
async def test_a_session_its_samples_and_its_deletion(server: Server) -> None:
    async with AsyncTitoClient(server.url) as client:
        await client.wait_ready(5)
        handle = await client.create_session(trajectory="tree", group_id="g")
        reply = await openai.AsyncOpenAI(base_url=handle.openai_base_url, api_key="x").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Hi"}]
        )
        samples = await client.samples(handle.session_id, rewards={reply.id: 0.5}, metadata={"step": 3})
        await client.delete_session(handle.session_id)
        with pytest.raises(SessionGoneError):
            await client.samples(handle.session_id)
    [sample] = samples.samples
    assert (sample["reward"], sample["group_id"], sample["metadata"]["step"]) == (0.5, "g", 3)


@pytest.mark.asyncio
async def test_a_call_to_a_silent_server_is_cancelled_at_its_deadline(silent_url: str) -> None:
    async with AsyncTitoClient(silent_url) as client:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            await client.samples("0" * 32, deadline_s=0.3)
        took = time.monotonic() - started
    assert 0.25 <= took < 1.0, took
