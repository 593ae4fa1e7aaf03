"""One inspect-ai episode against a tito session, run by `.venv-frameworks-inspect/bin/python` (inspect-ai changes
fsspec and wrapt from what tito's own venv holds: scripts/frameworks_inspect_venv.sh). Usage:
`python tests/server/inspect_episode.py LOG_DIR CHAT_URL`, where CHAT_URL is the session's OpenAI base
(`.../sessions/{id}/v1`): a one-sample eval whose solver offers the tool and generates until the model stops calling
it (inspect's `generate()` tool loop), through inspect's OpenAI-compatible provider. Driven by
tests/server/test_frameworks_venvs.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.server.frameworks import API_KEY, MODEL, TASK, get_weather


def run(log_dir: str, url: str) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import tool

    @tool(name="get_weather")
    def weather():  # type: ignore[no-untyped-def]
        async def execute(city: str, metric: bool) -> str:
            """The current weather in a city.

            Args:
                city: the city to look up
                metric: report degrees Celsius (else Fahrenheit)
            """
            return get_weather(city, metric)

        return execute

    task = Task(dataset=[Sample(input=TASK)], solver=[use_tools(weather()), generate()])
    [log] = eval(
        task, model=f"openai-api/tito/{MODEL}", model_base_url=url, log_dir=log_dir, display="none", max_retries=0
    )
    assert log.status == "success", log.error


if __name__ == "__main__":
    import os

    os.environ.setdefault("TITO_API_KEY", API_KEY)
    run(sys.argv[1], sys.argv[2])
