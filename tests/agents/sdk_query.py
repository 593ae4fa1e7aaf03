"""Runs one Claude Agent SDK `query` (its defaults, plus the Bash tool allowed) in the working directory and prints
the result message as JSON: the suite starts it as a subprocess so the agent gets its own environment.

Usage: python sdk_query.py PROMPT
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query


async def main(prompt: str) -> None:
    options = ClaudeAgentOptions(allowed_tools=["Bash"], cwd=os.getcwd())
    async for message in query(prompt=prompt, options=options):
        if isinstance(message, ResultMessage):
            print(json.dumps(dataclasses.asdict(message), default=str))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
