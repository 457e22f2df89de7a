"""Helpers for the console's cluster and topic tests: a browser form filled and submitted by field name, and the
cluster read back with real clients (confluent-kafka's AdminClient, DescribeQuorum over a raw socket) to check
what the pages show."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]
from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.types import TopicName
from kio.static.primitive import i32

from tests.support.browser import Browser
from tests.support.raw_client import RawClient

__all__ = ["describe_quorum", "fill_and_submit", "topic_config", "topic_partitions"]


def fill_and_submit(browser: Browser, form_css: str, fields: dict[str, str], button: str | None = None) -> None:
    """Type `fields` (by input name) into the form, press its submit button (or the one named `button`) and
    wait for the page that answers."""
    for name, value in fields.items():
        element = browser.find(f"{form_css} [name='{name}']")
        element.clear()
        if value:
            element.send_keys(value)
    css = f"{form_css} button[value='{button}']" if button else f"{form_css} button[type=submit]"
    old_html = browser.find("html")
    browser.find(css).click()
    browser.wait_until(lambda: _is_stale(old_html), what="the form's answer to load")
    browser.settle()


def _is_stale(element: Any) -> bool:
    try:
        element.tag_name  # noqa: B018 - reading it raises once the page was replaced
        return False
    except Exception:
        return True


def topic_partitions(admin: AdminClient, topic: str) -> int | None:
    """The topic's partition count in the cluster's metadata, None when it does not exist."""
    found = admin.list_topics(timeout=10).topics.get(topic)
    return None if found is None or found.error is not None else len(found.partitions)


def topic_config(admin: AdminClient, topic: str, name: str) -> Any:
    """DescribeConfigs' entry for one config of the topic."""
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    return next(iter(futures.values())).result(10)[name]


def describe_quorum(bootstrap: str) -> Any:
    """The metadata partition's DescribeQuorum answer, asked over a plain socket."""
    request = DescribeQuorumRequest(topics=(TopicData(topic_name=TopicName("__cluster_metadata"),
                                                      partitions=(PartitionData(partition_index=i32(0)),)),))
    with RawClient(bootstrap) as client:
        return client.request(request).topics[0].partitions[0]
