"""Prompt buffers: a prompt is written over an earlier one's memory only once nothing reads the earlier one."""

from __future__ import annotations

import threading
from array import array

import pytest

from tito.prompt_buffers import PromptBuffers


def ids(*values: int) -> array[int]:
    return array("i", values)


def test_a_prompt_holds_its_parts_ids_in_order() -> None:
    prompt = PromptBuffers().write((ids(1, 2), memoryview(ids(3, 4, 5))[:2], ids(), ids(6).tobytes()))
    assert prompt.format == "i" and prompt.tolist() == [1, 2, 3, 4, 6]


def test_a_dropped_prompt_s_buffer_is_written_over_by_the_next() -> None:
    buffers = PromptBuffers()
    first = buffers.write((ids(*range(100)),))
    del first
    second = buffers.write((ids(7, 8),))
    assert second.tolist() == [7, 8] and buffers.reused == 1, "shorter, over the same memory"
    del second
    assert buffers.write((ids(*range(200)),)).tolist() == list(range(200)) and buffers.reused == 2, "grown in place"


def test_a_prompt_still_read_is_never_written_over() -> None:
    buffers = PromptBuffers()
    held = [buffers.write((ids(turn, turn + 1, turn + 2),)) for turn in range(2 * PromptBuffers.MAX_BUFFERS)]
    assert [prompt.tolist() for prompt in held] == [[turn, turn + 1, turn + 2] for turn in range(len(held))]
    assert buffers.reused == 0
    del held[:3]
    assert buffers.write((ids(9),)).tolist() == [9]


def test_a_buffer_in_use_waits_at_the_back_and_is_reused_once_dropped() -> None:
    buffers = PromptBuffers()
    in_flight = buffers.write((ids(1, 2),))
    done = buffers.write((ids(3, 4),))
    del done
    assert buffers.write((ids(5),)).tolist() == [5] and buffers.reused == 1, "the busy one passed over, not lost"
    del in_flight
    assert buffers.write((ids(6),)).tolist() == [6] and buffers.reused == 2


def test_a_buffer_held_for_a_pool_s_worth_of_writes_is_let_go() -> None:
    buffers = PromptBuffers()
    kept = buffers.write((ids(1),))  # a record of requests holds it for good
    for turn in range(PromptBuffers.MAX_BUFFERS + 3):
        buffers.write((ids(turn),))
    assert kept.tolist() == [1] and len(buffers) == 1, "only the buffer written over stays"


def test_a_view_cut_from_a_prompt_keeps_its_buffer_from_reuse() -> None:
    buffers = PromptBuffers()
    tail = buffers.write((ids(1, 2, 3),))[1:]
    for _ in range(PromptBuffers.MAX_BUFFERS + 2):
        buffers.write((ids(4, 5, 6),))
    assert tail.tolist() == [2, 3]


def test_a_prompt_too_long_to_keep_gets_a_buffer_of_its_own() -> None:
    buffers = PromptBuffers()
    long = ids(*range(PromptBuffers.MAX_BUFFER_BYTES // 4 + 1))
    assert buffers.write((long,)).tolist() == long.tolist()
    assert buffers.write((ids(1),)).tolist() == [1] and buffers.reused == 0


def test_threads_writing_prompts_at_once_each_get_their_own_ids() -> None:
    buffers, failures = PromptBuffers(), []

    def write(worker: int) -> None:
        for turn in range(300):
            expected = [worker, turn, *range(turn % 50)]
            prompt = buffers.write((ids(worker, turn), ids(*range(turn % 50))))
            if prompt.tolist() != expected:
                failures.append((worker, turn))

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures and buffers.reused > 0


def test_a_prompt_is_read_only() -> None:
    prompt = PromptBuffers().write((ids(1, 2),))
    with pytest.raises(TypeError, match="read-only"):
        prompt[0] = 3
