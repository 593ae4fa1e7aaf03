"""One autogen-agentchat episode against a tito session, run by `.venv-frameworks-autogen/bin/python` (autogen-ext
pins protobuf 5, which conflicts with tito's own venv: scripts/frameworks_autogen_venv.sh). Usage:
`python tests/server/autogen_episode.py reflect|plain stream|whole CHAT_URL`, where CHAT_URL is the session's OpenAI
base (`.../sessions/{id}/v1`). `reflect`: `reflect_on_tool_use=True` with two tool iterations, so the third call is
autogen's reflection (sent without tools); `plain`: three tool iterations, the model answers by itself. Driven by
tests/server/test_frameworks_venvs.py.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.server.frameworks import API_KEY, MODEL, TASK, get_weather


def run(variant: str, stream: bool, url: str) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.models import ModelFamily, ModelInfo
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    info = ModelInfo(
        vision=False, function_calling=True, json_output=False, family=ModelFamily.UNKNOWN, structured_output=False
    )
    client = OpenAIChatCompletionClient(model=MODEL, base_url=url, api_key=API_KEY, model_info=info)
    reflect = variant == "reflect"
    agent = AssistantAgent(
        "weather",
        model_client=client,
        tools=[get_weather],
        reflect_on_tool_use=reflect,
        max_tool_iterations=2 if reflect else 3,
        model_client_stream=stream,
    )

    async def episode() -> None:
        result = await agent.run(task=TASK)
        await client.close()
        last = result.messages[-1]
        assert last.type == "TextMessage", f"the episode ended on {last.type}, not the answer"

    asyncio.run(episode())


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2] == "stream", sys.argv[3])
