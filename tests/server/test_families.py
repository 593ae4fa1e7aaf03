"""Sessions on families with other junctions: the stop token that doubles as the next opener is dropped from
the stored ids exactly once, and the sample is still exactly what the engine saw and sampled."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tito.server import create_app
from tito.server.commands.launch import build_state, instant_reply_ids
from tito.server.commands.running import serve_in_thread
from tito.server.state import ServerOptions

pytestmark = pytest.mark.usefixtures("shared_builtin_tokenizers")  # tests.conftest


@pytest.mark.parametrize("family", ["glm47", "deepseekv4", "qwen35"])
def test_each_prompt_is_the_stored_ids_after_the_junction_plus_the_appended_ids(family: str) -> None:
    state = build_state(ServerOptions(family=family), engine="instant")
    tt = state.tokenizers.default
    engine: Any = state.engine.inner
    dropped = tt.family.junction.trailing_ids_dropped
    reply = instant_reply_ids(tt)
    with serve_in_thread(create_app(state)) as url:
        session_id = httpx.post(f"{url}/sessions").json()["session_id"]
        messages: list[dict[str, Any]] = []
        for text in ["first", "second", "third"]:
            old = list(messages)
            messages.append({"role": "user", "content": text})
            answer = httpx.post(f"{url}/sessions/{session_id}/v1/chat/completions", json={"messages": messages})
            assert answer.status_code == 200, answer.text
            prompt = list(engine.requests[-1].prompt_ids)
            appended = tt.tokenize_additional_messages(old, messages)
            if old:
                previous = [*engine.requests[-2].prompt_ids, *reply]
                assert prompt == previous[: len(previous) - dropped] + appended
            else:
                assert prompt == appended
            messages.append(answer.json()["choices"][0]["message"])
        sample = httpx.post(f"{url}/sessions/{session_id}/samples").json()["samples"][0]
    assert sample["tokens"] == [*engine.requests[-1].prompt_ids, *reply]
    kept_sampled = 3 * len(reply) - 2 * dropped
    assert sum(sample["loss_mask"]) == kept_sampled
