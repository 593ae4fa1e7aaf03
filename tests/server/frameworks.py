"""Agent frameworks driven as their users write them, changed only in the base URL: each runs one episode (a
two-call tool loop, then the answer) against a tito session.

Each driver takes the session's OpenAI base URL and whether to stream (where the framework streams) and returns
when the framework considers the episode done. The frameworks are the `frameworks` extra of pyproject.toml.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

TASK = "What is the weather in Oslo and in Bergen?"
MODEL = "qwen3"
API_KEY = "sk-tito"


def get_weather(city: str, metric: bool) -> str:
    """The current weather in a city.

    Args:
        city: the city to look up
        metric: report degrees Celsius (else Fahrenheit)
    """
    return f"{city}: 12 C, sunny" if metric else f"{city}: 50 F, rainy"


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "metric": {"type": "boolean"}},
            "required": ["city", "metric"],
        },
    },
}


def run_openai_agents(url: str, stream: bool) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(base_url=url, api_key=API_KEY))
    agent = Agent(name="weather", instructions="Use the tool.", model=model, tools=[function_tool(get_weather)])

    async def episode() -> None:
        if stream:
            streamed = Runner.run_streamed(agent, TASK)
            async for _ in streamed.stream_events():
                pass
        else:
            await Runner.run(agent, TASK)

    asyncio.run(episode())


def run_langchain_openai(url: str, stream: bool) -> None:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    weather = tool(get_weather)
    llm = ChatOpenAI(model=MODEL, base_url=url, api_key=API_KEY).bind_tools([weather])  # type: ignore[arg-type]
    messages: list[BaseMessage] = [HumanMessage(TASK)]
    while True:
        if stream:
            reply: Any = None
            for chunk in llm.stream(messages):
                reply = chunk if reply is None else reply + chunk
        else:
            reply = llm.invoke(messages)
        assert isinstance(reply, AIMessage)
        messages.append(reply)
        if not reply.tool_calls:
            return
        for call in reply.tool_calls:
            messages.append(ToolMessage(weather.invoke(call["args"]), tool_call_id=call["id"]))


def run_pydantic_ai(url: str, stream: bool) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    agent = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url, api_key=API_KEY)), tools=[get_weather])
    if stream:

        async def drain(context: Any, events: Any) -> None:
            async for _ in events:
                pass

        agent.run_sync(TASK, event_stream_handler=drain)
    else:
        agent.run_sync(TASK)


def run_litellm(url: str, stream: bool) -> None:
    import litellm

    messages: list[Any] = [{"role": "user", "content": TASK}]
    while True:
        request: dict[str, Any] = {"model": f"openai/{MODEL}", "api_base": url, "api_key": API_KEY}
        if stream:
            chunks = list(litellm.completion(**request, messages=messages, tools=[WEATHER_TOOL], stream=True))
            response: Any = litellm.stream_chunk_builder(chunks, messages=messages)
        else:
            response = litellm.completion(**request, messages=messages, tools=[WEATHER_TOOL])
        message = response.choices[0].message
        messages.append(message)  # litellm's own Message object, as its docs show
        if not message.tool_calls:
            return
        for call in message.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def run_agno(url: str, stream: bool) -> None:
    from agno.agent import Agent
    from agno.models.openai.like import OpenAILike

    agent = Agent(model=OpenAILike(id=MODEL, base_url=url, api_key=API_KEY), tools=[get_weather], telemetry=False)
    if stream:
        for _ in agent.run(TASK, stream=True):
            pass
    else:
        agent.run(TASK)


def run_mini_swe_agent(url: str, stream: bool) -> None:
    from importlib.resources import files

    import yaml
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.litellm_model import LitellmModel

    config = yaml.safe_load(files("minisweagent.config").joinpath("default.yaml").read_text())
    model = LitellmModel(
        model_name=f"openai/{MODEL}", model_kwargs={"api_base": url, "api_key": API_KEY}, cost_tracking="ignore_errors"
    )
    DefaultAgent(model, LocalEnvironment(), **{**config["agent"], "step_limit": 5}).run(TASK)


def run_smolagents(url: str, stream: bool) -> None:
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    model = OpenAIServerModel(MODEL, api_base=url, api_key=API_KEY)
    agent = ToolCallingAgent(tools=[tool(get_weather)], model=model, max_steps=4, stream_outputs=stream)
    agent.run(TASK)


def _dspy_fields(**fields: str) -> str:
    return "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in fields.items()) + "[[ ## completed ## ]]"


DSPY_REPLIES = (
    _dspy_fields(next_thought="Look up Oslo.", next_tool_name="get_weather",
                 next_tool_args=json.dumps({"city": "Oslo", "metric": True})),
    _dspy_fields(next_thought="Now Bergen.", next_tool_name="get_weather",
                 next_tool_args=json.dumps({"city": "Bergen", "metric": False})),
    _dspy_fields(next_thought="Both known.", next_tool_name="finish", next_tool_args="{}"),
    _dspy_fields(reasoning="Both known.", answer="Oslo is sunny, Bergen is rainy."),
)  # fmt: skip
"""What the scripted model samples for dspy's ReAct (its ChatAdapter's field format): two tool steps, `finish`, then
the answer its extract step asks for. dspy sends each call as a fresh [system, user] conversation."""


def run_dspy(url: str) -> None:
    import dspy

    lm = dspy.LM(f"openai/{MODEL}", api_base=url, api_key=API_KEY, cache=False)
    with dspy.context(lm=lm):
        dspy.ReAct("question -> answer", tools=[get_weather], max_iters=4)(question=TASK)


@dataclass(frozen=True)
class Framework:
    """One framework: its PyPI distribution, how its user drives it, and how its episodes end."""

    name: str
    distribution: str
    run: Callable[[str, bool], None]
    streams: bool
    """Whether the framework has a streaming mode (then episodes run streamed and not)."""
    tool: str = "get_weather"
    """The tool the scripted model calls twice."""
    final_tool: str | None = None
    """The tool call that ends an episode (frameworks that finish by a tool); None: a plain answer."""
    rewrites: str | None = None
    """What the framework rewrites in the history it resends, where no harness rule can take the rewritten reply for
    the sampled one: each rewritten reply branches (a linear session opens a conversation continuing the one it
    diverged from), so its episode is one sample per branch, every sampled id trained; None: it resends its replies."""

    @property
    def version(self) -> str:
        return version(self.distribution)


FRAMEWORKS = (
    Framework("openai-agents", "openai-agents", run_openai_agents, streams=True),
    Framework("langchain-openai", "langchain-openai", run_langchain_openai, streams=True),
    Framework("pydantic-ai", "pydantic-ai-slim", run_pydantic_ai, streams=True),
    Framework("litellm", "litellm", run_litellm, streams=True),
    Framework("agno", "agno", run_agno, streams=True),
    Framework("mini-swe-agent", "mini-swe-agent", run_mini_swe_agent, streams=False, tool="bash", final_tool="bash"),
    Framework(
        "smolagents",
        "smolagents",
        run_smolagents,
        streams=True,
        final_tool="final_answer",
        rewrites="re-writes each generated tool call into assistant text (`Calling tools: [...]`) when it resends",
    ),
)
