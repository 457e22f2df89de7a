"""DescribeTopicPartitions' paging (KIP-966): which partitions a page holds and where the next one starts."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord, PartitionRecord, TopicRecord
from moldau.server.handlers.describe_topic_partitions import paginate


def image(**sizes: int) -> MetadataImage:
    records: list[MetadataRecord] = []
    for i, (name, count) in enumerate(sizes.items()):
        topic_id = uuid.UUID(int=i + 1)
        records.append(TopicRecord(name, topic_id))
        records += [PartitionRecord(topic_id, p, (1,), (1,), 1, 0, 0) for p in range(count)]
    return MetadataImage().apply(records, len(records) - 1)


def pages(topics: MetadataImage, names: list[str], limit: int) -> list[list[tuple[str, int, int]]]:
    out = []
    cursor = None
    while True:
        page = paginate(topics.topics_by_name, names, cursor, limit)
        out.append([(name, first, count) for name, _, first, count in page.topics])
        if page.next_cursor is None:
            return out
        cursor = SimpleNamespace(topic_name=page.next_cursor[0], partition_index=page.next_cursor[1])


def test_pages_split_topics_and_end_without_a_cursor() -> None:
    topics = image(a=4, b=3, c=1)
    assert pages(topics, ["a", "b", "c"], 3) == [[("a", 0, 3)], [("a", 3, 1), ("b", 0, 2)], [("b", 2, 1), ("c", 0, 1)]]
    assert pages(topics, ["a", "b", "c"], 100) == [[("a", 0, 4), ("b", 0, 3), ("c", 0, 1)]]


def test_a_page_that_ends_with_a_topic_points_at_the_next_one() -> None:
    page = paginate(image(a=2, b=2).topics_by_name, ["a", "b"], None, 2)
    assert page.next_cursor == ("b", 0)
    last = paginate(image(a=2).topics_by_name, ["a"], None, 2)
    assert last.next_cursor is None


def test_unknown_topics_take_no_partitions_and_the_cursor_skips_earlier_names() -> None:
    topics = image(b=2)
    assert pages(topics, ["a", "b"], 1) == [[("a", 0, 0), ("b", 0, 1)], [("b", 1, 1)]]
    cursor = SimpleNamespace(topic_name="b", partition_index=1)
    assert [(n, f, c) for n, _, f, c in paginate(topics.topics_by_name, ["a", "b"], cursor, 5).topics] == [("b", 1, 1)]
