"""`Message`: one OpenAI chat message (`role`, `content`, `reasoning_content`, `tool_calls`, `tool_call_id`, ...) as
every layer of tito passes it: a JSON object. The one definition; a module that reads messages imports it from here.

Imports nothing from tito.
"""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]
