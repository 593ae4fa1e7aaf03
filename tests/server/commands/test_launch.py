"""Launch: the instant engine's reply script is the family's own assistant render, ending in its stop token."""

from __future__ import annotations

import pytest

from tests.conftest import family_tokenizer
from tito.errors import ConfigurationError
from tito.server.commands.launch import INSTANT_REPLY, build_state, instant_reply_ids
from tito.server.state import ServerOptions
from tito.tokenizer import get_tito_tokenizer


@pytest.mark.parametrize("family", ["qwen3", "qwen35", "glm47", "kimi25", "deepseekv4"])
def test_the_instant_reply_parses_back_to_the_fixed_text_and_ends_in_a_stop_token(family: str) -> None:
    tokenizer = family_tokenizer(family)
    tt = get_tito_tokenizer(tokenizer, family)
    ids = instant_reply_ids(tt)
    stops = {tokenizer.encode(token, add_special_tokens=False)[0] for token in tt.family.stop_tokens}
    assert ids[-1] in stops and not stops & set(ids[:-1])
    prompt = tokenizer.encode(tt.render([{"role": "user", "content": "."}], add_generation_prompt=True),
                              add_special_tokens=False)  # fmt: skip
    result = tt.parse_completion(ids, prompt)
    assert result.message["content"].strip() == INSTANT_REPLY
    assert result.finish_reason == "stop"


def test_build_state_names_what_is_missing() -> None:
    state = build_state(ServerOptions(family="qwen3"), engine="instant")
    assert state.engine.info.name == "instant" and state.tokenizers.family.name == "qwen3"
    with pytest.raises(ConfigurationError, match="--engine-url"):
        build_state(ServerOptions(family="qwen3"), engine="sglang")
    with pytest.raises(ConfigurationError, match="--tokenizer DIR"):
        build_state(ServerOptions(), engine="instant")
