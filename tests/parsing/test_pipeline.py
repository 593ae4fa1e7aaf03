"""The shared pipeline: boundaries by id, text fallback, stop tokens, reasoning state."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.parsing.cases import TOOLS, get_case
from tito.families import get_family
from tito.parsing import CallStatus, build_completion_parser
from tito.tokenizer import get_tito_tokenizer
from tito.tokenizer_loading import LocalTokenizer

_DSML_CALL = (
    'Sure.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
)


def test_markers_the_tokenizer_does_not_keep_atomic_fall_back_to_text(qwen3_tokenizer: LocalTokenizer) -> None:
    family = get_family("deepseekv4")  # `｜DSML｜` is ordinary text in the Qwen3 vocabulary
    parser = build_completion_parser(family, qwen3_tokenizer)
    assert "｜DSML｜" in dict(parser.scanner.text_markers)
    ids = qwen3_tokenizer.encode("Hmm.</think>" + _DSML_CALL + "<｜end▁of▁sentence｜>")
    result = parser.parse(ids, tools=TOOLS)
    assert result.message["content"] == "Sure."
    assert [call["function"]["arguments"] for call in result.message["tool_calls"]] == ['{"city": "Paris", "days": 3}']
    assert result.finish_reason == "tool_calls"  # the stop token is text here too, found as text


def test_a_noncharacter_written_by_the_model_never_poses_as_a_marker(qwen3_tokenizer: LocalTokenizer) -> None:
    family = get_family("qwen3")
    sentinels = "".join(chr(0xFDD0 + k) for k in range(4))
    ids = qwen3_tokenizer.encode(f"<think>\nr\n</think>\n\nodd {sentinels} text<|im_end|>")
    result = build_completion_parser(family, qwen3_tokenizer).parse(ids, tools=TOOLS)
    assert result.message["content"] == "odd \ufffd\ufffd\ufffd\ufffd text"
    assert result.attempts == ()


def test_whether_the_prompt_opened_reasoning_is_read_from_its_last_ids(qwen35_tokenizer: LocalTokenizer) -> None:
    family = get_family("qwen35")
    user = [{"role": "user", "content": "hi"}]
    completion = qwen35_tokenizer.encode("Hello.<|im_end|>")
    for thinking, has_reasoning in ((True, True), (False, False)):
        tito = get_tito_tokenizer(qwen35_tokenizer, "qwen35", chat_template_kwargs={"enable_thinking": thinking})
        prompt_ids = qwen35_tokenizer.encode(tito.render(user, add_generation_prompt=True))
        result = build_completion_parser(family, qwen35_tokenizer).parse(completion, prompt_ids)
        assert ("reasoning_content" in result.message) is has_reasoning
        assert result.message.get("reasoning_content", result.message["content"]) == "Hello."


@pytest.mark.parametrize("first_stop", ["<|im_end|>", "<|endoftext|>"])
def test_a_generation_that_ran_past_a_stop_token_ends_at_the_first(
    qwen3_tokenizer: LocalTokenizer, first_stop: str
) -> None:
    ids = qwen3_tokenizer.encode(f"<think>\nr\n</think>\n\nfirst{first_stop}second<|im_end|>")
    result = build_completion_parser(get_family("qwen3"), qwen3_tokenizer).parse(ids)
    assert (result.message["content"], result.finish_reason) == ("first", "stop")


def test_the_default_family_splits_reasoning_and_stops_on_the_tokenizer_eos(qwen3_tokenizer: LocalTokenizer) -> None:
    family = get_family("default")
    ids = qwen3_tokenizer.encode("<think>\nweigh it\n</think>\n\nAnswer: <tool_call> is text here<|im_end|>")
    result = build_completion_parser(family, qwen3_tokenizer).parse(ids, tools=TOOLS)
    assert result.message == {
        "role": "assistant",
        "content": "Answer: <tool_call> is text here",
        "reasoning_content": "weigh it",
    }
    assert result.finish_reason == "stop"
    assert build_completion_parser(family, qwen3_tokenizer).parse(ids[:-1]).finish_reason == "length"


def test_a_call_inside_unclosed_reasoning_is_not_a_call() -> None:
    case = get_case("qwen35")
    text = "maybe <tool_call>\n<function=search>\n</function>\n</tool_call> later"
    prompt_ids = case.tokenizer.encode(case.render([{"role": "user", "content": "q"}], None, True))
    result = case.tito.parse_completion(case.tokenizer.encode(text), prompt_ids, TOOLS)
    assert result.message == {"role": "assistant", "content": "", "reasoning_content": text}
    assert result.attempts == () and result.finish_reason == "length"


def test_failed_calls_stay_out_of_the_message_but_keep_their_text() -> None:
    case = get_case("qwen3")
    text = '<think>\nr\n</think>\n\n<tool_call>\n{"name": "search", "arguments": {"query": }\n</tool_call><|im_end|>'
    result = case.tito.parse_completion(case.tokenizer.encode(text), None, TOOLS)
    assert "tool_calls" not in result.message and result.finish_reason == "stop"
    (attempt,) = result.failed_calls
    assert attempt.status is CallStatus.INVALID_ARGUMENTS and '"query": }' in attempt.raw and attempt.name == "search"


def test_long_completions_find_markers_and_stops_as_short_ones_do(qwen3_tokenizer: LocalTokenizer) -> None:
    from tito.parsing import markers

    family = get_family("qwen3")
    spelled = [t for char in "<tool_call>" for t in qwen3_tokenizer.encode(char)]
    head = qwen3_tokenizer.encode("<think>\n" + "step by step. " * 1500 + "\n</think>\n\nSee ")
    tail = qwen3_tokenizer.encode(
        '.\n<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call><|im_end|>ignored<|im_end|>'
    )
    ids = head + spelled + tail
    assert len(ids) > markers._SCAN_LIMIT
    result = build_completion_parser(family, qwen3_tokenizer).parse(ids, tools=TOOLS)
    assert result.message["content"] == "See <tool_call>."
    assert result.message["reasoning_content"] == ("step by step. " * 1500).strip("\n")
    assert [c["function"]["arguments"] for c in result.message["tool_calls"]] == ['{"query": "x"}']
    assert result.finish_reason == "tool_calls"
    assert build_completion_parser(family, qwen3_tokenizer).parse(ids[: len(head) + 5]).finish_reason == "length"


def test_a_marker_that_can_overlap_itself_is_counted_with_its_overlaps() -> None:
    from tito.parsing.markers import _occurrence_counter

    count = _occurrence_counter("｜DSML｜")
    assert count("a｜DSML｜b｜DSML｜") == 2
    assert count("｜DSML｜DSML｜") == 2  # a spelled `｜DSML` right before the real token: two, not one
    assert _occurrence_counter("<tool_call>")("<tool_call><tool_call>") == 2


def test_a_single_ids_text_is_decoded_once_and_past_the_bound_decoded_each_time(
    qwen3_tokenizer: LocalTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanner = build_completion_parser(get_family("qwen3"), qwen3_tokenizer).scanner
    decoded: list[list[int]] = []

    class Counted:
        def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
            decoded.append(list(ids))
            return qwen3_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    monkeypatch.setattr(scanner, "tokenizer", Counted())
    cafe = qwen3_tokenizer.encode(" café au lait")
    assert [scanner.run_text([token]) for token in cafe * 2] == [qwen3_tokenizer.decode([t]) for t in cafe * 2]
    assert decoded == [[token] for token in cafe]  # the second time from memory
    assert scanner.run_text(cafe) == " café au lait" and len(decoded) == len(cafe)  # joined (byte-level), no call
    monkeypatch.setattr("tito.parsing.markers._TOKEN_TEXTS_KEPT", len(scanner._token_texts))
    other = qwen3_tokenizer.encode(" zebra")[0]
    assert scanner.run_text([*cafe, other]) == qwen3_tokenizer.decode([*cafe, other])
    assert decoded[-1] == [*cafe, other]  # a run with an id the full table cannot hold: one decode call for it
    assert scanner.token_text(other) == scanner.token_text(other) == qwen3_tokenizer.decode([other])
    assert decoded[-2:] == [[other], [other]]  # past the bound: decoded each time, never a stale or missing text


@pytest.mark.parametrize("name", ["qwen3", "qwen35", "deepseekv4"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_runs_text_joined_from_its_ids_texts_is_the_tokenizers_decode(name: str, data: st.DataObject) -> None:
    """Byte-level decoders: any ids (added tokens, bytes of a split character, whole characters) decode as HF does."""
    case = get_case(name)
    scanner = case.parser.scanner
    assert scanner._joins_token_texts
    tokenizer = case.tokenizer
    pool = [
        *tokenizer.encode(" café 😀 𝔘 中文 done \ufffd x"),
        *[token for token in range(256)],  # the single bytes: most are parts of a character
        *sorted(case.tito._parser.scanner.marker_ids),
        *case.tito.stop_token_ids,
    ]
    ids = data.draw(st.lists(st.sampled_from(pool) | st.integers(0, tokenizer.vocab_size - 1), max_size=40))
    assert scanner.run_text(ids) == tokenizer.decode(ids, skip_special_tokens=False)


def test_a_tokenizer_without_a_byte_level_decoder_decodes_every_run_in_one_call(
    qwen3_tokenizer: LocalTokenizer,
) -> None:
    class Plain:
        """Decodes as Qwen3 does, without saying its decoder is byte-level."""

        def __init__(self) -> None:
            self.calls: list[list[int]] = []

        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return qwen3_tokenizer.encode(text, add_special_tokens=add_special_tokens)

        def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
            self.calls.append(list(ids))
            return qwen3_tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    plain = Plain()
    scanner = build_completion_parser(get_family("qwen3"), plain).scanner  # type: ignore[arg-type]
    ids = qwen3_tokenizer.encode("one two three")
    plain.calls.clear()
    assert scanner.run_text(ids) == "one two three" and plain.calls == [ids]
