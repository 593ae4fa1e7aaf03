"""Long renders leave the event loop: a first turn with a huge system prompt is built in a worker thread."""

from __future__ import annotations

import asyncio
import threading

from tests.server.conftest import Server
from tito.server.models import ChatCompletionRequest
from tito.server.sessions.registry import Session
from tito.server.turns import completions
from tito.trajectory.episode import Episode
from tito.trajectory.events import SessionConfig


def test_a_long_first_turn_is_built_off_the_event_loop_and_a_short_one_on_it(server: Server) -> None:
    threads: list[bool] = []
    original = completions.build_prompt_ids

    def recording(*args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread() is threading.main_thread())
        return original(*args, **kwargs)  # type: ignore[arg-type]

    async def prepare(content: str) -> None:
        session = Session("offload", SessionConfig(), Episode(SessionConfig()), 0.0)
        request = ChatCompletionRequest(messages=[{"role": "user", "content": content}])
        await completions.prepare_turn(server.state, session, request, "fp", False)

    completions.build_prompt_ids = recording  # type: ignore[assignment]
    try:
        asyncio.run(prepare("short"))
        asyncio.run(prepare("long " * (server.state.options.offload_chars // 4)))
    finally:
        completions.build_prompt_ids = original
    assert threads == [True, False]
