"""One strands-agents episode against a tito session, run by `.venv-frameworks-strands/bin/python` (strands pins
openai and anthropic below what tito's own venv holds, so it lives in a venv of its own:
scripts/frameworks_strands_venv.sh). Usage: `python tests/server/strands_episode.py openai|anthropic SESSION_URL`,
where SESSION_URL is the session's base (`.../sessions/{id}`). Driven by tests/server/test_frameworks_strands.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.server.frameworks import API_KEY, MODEL, TASK, get_weather


def run(provider: str, session_url: str) -> None:
    from strands import Agent, tool

    model: object
    if provider == "openai":
        from strands.models.openai import OpenAIModel

        model = OpenAIModel(client_args={"base_url": f"{session_url}/v1", "api_key": API_KEY}, model_id=MODEL)
    else:
        from strands.models.anthropic import AnthropicModel

        model = AnthropicModel(
            client_args={"base_url": session_url, "api_key": API_KEY}, model_id=MODEL, max_tokens=1024
        )
    Agent(model=model, tools=[tool(get_weather)], callback_handler=None)(TASK)


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2])
