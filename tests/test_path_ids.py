"""PathIds reads a path's ids as the parts that hold them: the same ids as their join, without joining them."""

from __future__ import annotations

import random
import sys
from array import array

import pytest

from tito.path_ids import PathIds, exact_ids, joined_ids


def random_parts(rng: random.Random) -> list[array[int]]:
    sizes = [rng.choice((0, 1, 3, 40)) for _ in range(rng.randrange(8))]
    return [array("i", (rng.randrange(1000) for _ in range(size))) for size in sizes]


def test_path_ids_read_like_their_joined_array() -> None:
    rng = random.Random(7)
    for _ in range(200):
        parts = random_parts(rng)
        ids, joined = PathIds(parts), joined_ids(parts)
        assert len(ids) == len(joined) and list(ids) == joined.tolist() and ids == joined and ids.joined() == joined
        assert [ids[index] for index in range(-len(joined), len(joined))] == [*joined, *joined]
        assert ids[1:-1] == joined[1:-1]
        for count in {0, len(joined) // 2, max(0, len(joined) - 1), len(joined)}:
            assert joined_ids(ids.head_parts(count)) == joined[:count]
        with pytest.raises(IndexError, match=f"of a path of {len(joined)} ids"):
            ids[len(joined)]


def test_the_kept_head_views_the_last_part_instead_of_copying_it() -> None:
    first, last = array("i", [1, 2, 3]), array("i", [4, 5, 6])
    head = PathIds([first, last]).head_parts(5)
    assert head[0] is first and isinstance(head[1], memoryview) and head[1].obj is last
    assert PathIds([first, last]).head_parts(6) == (first, last)


def test_path_ids_equal_by_value_whatever_their_parts() -> None:
    assert PathIds([array("i", [1, 2]), array("i", [3])]) == PathIds([array("i", [1]), array("i"), array("i", [2, 3])])
    assert PathIds([array("i", [1, 2])]) != PathIds([array("i", [2, 1])])
    assert PathIds() == array("i") and PathIds() != [1]


def test_exact_ids_copy_a_view_into_an_array_of_its_size() -> None:
    source = array("i", range(1000))
    copied = exact_ids(memoryview(source)[10:])
    assert copied == source[10:] and copied.buffer_info()[0] != source.buffer_info()[0]
    assert sys.getsizeof(copied) == sys.getsizeof(source[10:]), "no spare room kept for good"
