"""The cluster and topic pages in a real browser: topics created, altered, grown and deleted through the forms
and checked with an AdminClient; offsets, sizes, brokers and the metadata quorum checked against what the cluster
says through other clients."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigSource, NewTopic  # type: ignore[attr-defined]
from selenium.webdriver.remote.webelement import WebElement

from moldau.config import TOPIC_CONFIGS
from tests.support.broker_process import BrokerProcess
from tests.support.browser import Browser
from tests.support.clients import ck_produce
from tests.support.console_topics import describe_quorum, fill_and_submit, topic_config, topic_partitions


@pytest.fixture
def admin(console_broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": console_broker.bootstrap})


def _create(admin: AdminClient, name: str, partitions: int = 1) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def _eventually(browser: Browser, condition: Callable[[], bool], what: str) -> None:
    """Wait for `condition`, reloading the page between tries: a broker's metadata may trail the controller's
    answer to a change for a moment."""
    def reloaded() -> bool:
        browser.driver.refresh()
        browser.settle()
        return condition()
    if not condition():
        browser.wait_until(reloaded, timeout_s=10, what=what)


def _cells(browser: Browser, row_css: str) -> dict[str, str]:
    """The text of each classed cell of one table row, by class."""
    row = browser.find(row_css)
    return {_last_class(cell): cell.text for cell in row.find_elements("css selector", "td[class]")}


def _last_class(cell: WebElement) -> str:
    classes: str | None = cell.get_attribute("class")
    assert classes is not None, "cells are found by their class"
    return classes.split()[-1]


def test_a_topic_created_through_the_form_is_in_the_list_and_the_metadata(browser: Browser,
                                                                          admin: AdminClient) -> None:
    browser.open("/topics")
    fill_and_submit(browser, "#create-topic", {"name": "ct-created", "partitions": "3", "replication_factor": "1",
                                               "configs": "retention.ms=123456\n# comment\nmax.message.bytes=65536"})

    assert browser.driver.current_url.endswith("/topics?created=ct-created")
    browser.wait_for_text("#notice", "ct-created created")
    _eventually(browser, lambda: bool(browser.find_all("#topics tr[data-topic='ct-created']")), "the new topic")
    row = _cells(browser, "#topics tr[data-topic='ct-created']")
    assert (row["partitions"], row["replication"], row["messages"]) == ("3", "1", "0"), row
    assert topic_partitions(admin, "ct-created") == 3
    assert topic_config(admin, "ct-created", "retention.ms").value == "123456"
    assert topic_config(admin, "ct-created", "max.message.bytes").value == "65536"
    browser.screenshot("topics-list")


def test_create_form_errors_are_shown_beside_the_form(browser: Browser, admin: AdminClient) -> None:
    _create(admin, "ct-existing")
    browser.open("/topics")
    cases = [
        ({"name": "bad name!", "partitions": "1"}, "TOPIC_EXCEPTION"),  # librdkafka's INVALID_TOPIC_EXCEPTION
        ({"name": "ct-existing", "partitions": "1"}, "TOPIC_ALREADY_EXISTS"),
        ({"name": "ct-zero", "partitions": "0"}, "Partitions must be a whole number of at least 1"),
        ({"name": "ct-badconf", "partitions": "1", "configs": "retention.ms=soon"}, "INVALID_CONFIG"),
        ({"name": "ct-noequals", "partitions": "1", "configs": "retention.ms"}, "expected key=value"),
    ]
    for fields, expected in cases:
        fill_and_submit(browser, "#create-topic", {"configs": "", **fields})
        browser.wait_for_text("#create-error", expected)
        # What was typed stays in the form, to be corrected.
        assert browser.find("#create-topic [name=name]").get_attribute("value") == fields["name"]
    browser.screenshot("topics-create-error")
    errors = browser.console_errors()
    assert len(errors) == len(cases) and all("400" in e for e in errors), errors  # one per refused form
    assert all(topic_partitions(admin, name) is None for name in ("bad name!", "ct-zero", "ct-badconf"))


def test_the_list_filters_by_name_and_hides_internal_topics(browser: Browser, admin: AdminClient) -> None:
    for name in ("ct-filter-alpha", "ct-filter-beta", "_ct-private"):
        _create(admin, name)
    browser.open("/topics?q=FILTER-al")
    assert [r.get_attribute("data-topic") for r in browser.find_all("#topics tbody tr")] == ["ct-filter-alpha"]

    browser.open("/topics")
    shown = [r.get_attribute("data-topic") for r in browser.find_all("#topics tbody tr")]
    assert "ct-filter-beta" in shown and "_ct-private" not in shown
    browser.find("#topic-filter [name=internal]").click()
    fill_and_submit(browser, "#topic-filter", {"q": "ct-"})
    assert browser.driver.current_url.endswith("/topics?q=ct-&internal=1")
    assert "internal" in browser.find("#topics tr[data-topic='_ct-private']").text


def test_partitions_show_the_offsets_and_sizes_of_what_was_produced(browser: Browser, admin: AdminClient,
                                                                    console_broker: BrokerProcess) -> None:
    _create(admin, "ct-offsets", partitions=2)
    ck_produce(console_broker.bootstrap, "ct-offsets",
               [{"partition": 0, "value": b"x" * 100}] * 7 + [{"partition": 1, "value": b"y" * 100}] * 3)
    # Move partition 0's start, so earliest is not simply 0.
    deleted = admin.delete_records([TopicPartition("ct-offsets", 0, 2)])
    next(iter(deleted.values())).result(10)

    browser.open("/topics/ct-offsets")
    assert browser.find(".tabs a[aria-current=page]").text == "Partitions"
    p0, p1 = _cells(browser, "tr[data-partition='0']"), _cells(browser, "tr[data-partition='1']")
    assert (p0["leader"], p0["replicas"], p0["isr"]) == ("1", "1", "1"), p0
    assert (p0["earliest"], p0["latest"], p0["messages"]) == ("2", "7", "5"), p0
    assert (p1["earliest"], p1["latest"], p1["messages"]) == ("0", "3", "3"), p1
    assert p0["size"].endswith("B") and p0["size"] != "0 B", p0  # seven records of 100 bytes on disk
    charts = browser.find_all("[data-throughput]")
    assert [chart.get_attribute("data-topic") for chart in charts] == ["ct-offsets"]  # the topic's own chart
    browser.screenshot("topic-partitions")
    # The table follows the log without a reload.
    ck_produce(console_broker.bootstrap, "ct-offsets", [{"partition": 1, "value": b"z"}] * 4)
    browser.wait_for_text("tr[data-partition='1'] .latest", "7", timeout_s=8)
    assert _cells(browser, "tr[data-partition='1']")["messages"] == "7"

    browser.open("/topics?q=ct-offsets")
    row = _cells(browser, "#topics tr[data-topic='ct-offsets']")
    assert row["messages"] == "12" and row["size"] != "0 B", row


def test_partitions_are_added_through_the_form(browser: Browser, admin: AdminClient) -> None:
    _create(admin, "ct-grow", partitions=2)
    browser.open("/topics/ct-grow")
    fill_and_submit(browser, "#add-partitions", {"total": "2"})
    browser.wait_for_text("#add-error", "above 2")
    browser.console_errors()  # the refused form's 400

    fill_and_submit(browser, "#add-partitions", {"total": "5"})
    browser.wait_for_text("#notice", "5 partitions")
    assert len(browser.find_all("#partitions tbody tr")) == 5
    assert topic_partitions(admin, "ct-grow") == 5


def test_delete_needs_the_topic_name_typed(browser: Browser, admin: AdminClient) -> None:
    _create(admin, "ct-doomed")
    browser.open("/topics/ct-doomed")
    fill_and_submit(browser, "#delete-topic", {"confirm": "ct-doome"})
    browser.wait_for_text("#delete-error", "Type the topic's name, ct-doomed")
    browser.screenshot("topic-delete-refused")
    assert browser.console_errors()  # the refused form's 400
    assert topic_partitions(admin, "ct-doomed") == 1

    fill_and_submit(browser, "#delete-topic", {"confirm": "ct-doomed"})
    browser.wait_for_text("#notice", "ct-doomed deleted")
    _eventually(browser, lambda: not browser.find_all("#topics tr[data-topic='ct-doomed']"), "the topic to go")
    browser.wait_until(lambda: topic_partitions(admin, "ct-doomed") is None, what="the topic to be gone")


def test_a_config_is_set_and_deleted_through_the_form(browser: Browser, admin: AdminClient) -> None:
    _create(admin, "ct-configs")
    browser.open("/topics/ct-configs/configs")
    assert browser.find(".tabs a[aria-current=page]").text == "Configs"
    documented = browser.find("tr[data-config='retention.ms'] .name span")
    assert documented.get_attribute("title") == TOPIC_CONFIGS["retention.ms"].doc  # the documentation tooltip
    assert _cells(browser, "tr[data-config='retention.ms']")["source"] == "default"

    fill_and_submit(browser, "#alter-config", {"config": "retention.ms", "value": "7200000"}, button="set")
    browser.wait_for_text("#notice", "retention.ms set")
    row = _cells(browser, "tr[data-config='retention.ms']")
    assert (row["value"], row["source"]) == ("7200000", "topic override"), row
    entry = topic_config(admin, "ct-configs", "retention.ms")
    assert (entry.value, entry.source) == ("7200000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    browser.screenshot("topic-configs")

    fill_and_submit(browser, "#alter-config", {"config": "retention.ms", "value": "soon"}, button="set")
    browser.wait_for_text("#alter-error", "INVALID_CONFIG")
    fill_and_submit(browser, "#alter-config", {"config": "no.such.config", "value": "1"}, button="set")
    browser.wait_for_text("#alter-error", "INVALID_CONFIG")
    assert len(browser.console_errors()) == 2  # the two refused changes' 400s
    assert topic_config(admin, "ct-configs", "retention.ms").value == "7200000"

    fill_and_submit(browser, "#alter-config", {"config": "retention.ms", "value": ""}, button="delete")
    browser.wait_for_text("#notice", "override of retention.ms deleted")
    assert _cells(browser, "tr[data-config='retention.ms']")["source"] == "default"
    assert topic_config(admin, "ct-configs", "retention.ms").source == ConfigSource.DEFAULT_CONFIG.value


def test_brokers_page_shows_each_broker_with_its_log_dirs(browser: Browser, admin: AdminClient,
                                                          console_broker: BrokerProcess) -> None:
    _create(admin, "ct-brokers", partitions=4)
    metadata = admin.list_topics(timeout=10)
    led = sum(1 for t in metadata.topics.values() for p in t.partitions.values() if p.leader == 1)
    hosted = sum(1 for t in metadata.topics.values() for p in t.partitions.values() if 1 in p.replicas)

    browser.open("/brokers")
    rows = browser.find_all("#brokers tbody tr")
    assert len(rows) == 1
    text = rows[0].text
    assert f"127.0.0.1:{console_broker.port}" in text and "controller" in text, text
    assert int(browser.find("#broker-1 .leaders").text) == led
    assert int(browser.find("#broker-1 .replicas").text) == hosted
    assert browser.find("#broker-1 .log-dir code").text == str(console_broker.data_dir / "logs")
    assert browser.find("#broker-1 .dir-size").text != "0 B"
    browser.screenshot("brokers")


def test_overview_shows_the_metadata_quorum(browser: Browser, console_broker: BrokerProcess) -> None:
    before = describe_quorum(console_broker.bootstrap)
    browser.open("/")
    after = describe_quorum(console_broker.bootstrap)

    assert browser.find("#quorum-leader").text == str(after.leader_id) == "1"
    assert browser.find("#quorum-epoch").text == str(after.leader_epoch)
    assert int(before.high_watermark) <= int(browser.find("#quorum-high-watermark").text) <= int(after.high_watermark)
    rows = [r.text.split() for r in browser.find_all("#quorum tbody tr")]
    assert len(rows) == 1 and rows[0][:2] == ["1", "leader"] and rows[0][3] == "0", rows  # the leader has no lag
    # The figures refresh in place (htmx) without reloading the page.
    browser.driver.execute_script("document.getElementById('quorum-epoch').textContent = 'stale'")
    browser.wait_for_text("#quorum-epoch", str(after.leader_epoch), timeout_s=6)
    browser.screenshot("overview-quorum")


def test_topic_pages_in_the_dark_theme(browser: Browser, admin: AdminClient) -> None:
    _create(admin, "ct-dark", partitions=2)
    browser.open("/topics")
    browser.driver.execute_script("localStorage.setItem('moldau-theme', 'dark')")
    try:
        browser.open("/topics/ct-dark")
        browser.screenshot("topic-partitions-dark")
        browser.open("/topics/ct-dark/configs")
        browser.screenshot("topic-configs-dark")
    finally:
        browser.driver.execute_script("localStorage.removeItem('moldau-theme')")


def test_unknown_topic_pages_are_not_found(browser: Browser) -> None:
    for path in ("/topics/ct-never-created", "/topics/ct-never-created/configs"):
        browser.open(path)
        assert "UNKNOWN_TOPIC_OR_PARTITION" in browser.find(".error").text
    browser.console_errors()  # the 404s


def _post(url: str, fields: dict[str, str]) -> tuple[int, str]:
    """A form POST as a browser on the console's own page sends it; the status and page it ends on."""
    data = urllib.parse.urlencode(fields).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=15) as response:
            return response.status, response.geturl()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_every_topic_route_takes_dots_underscores_and_dashes(admin: AdminClient,
                                                             console_broker: BrokerProcess) -> None:
    name = "ct.dotted_under-score"
    _create(admin, name, partitions=1)
    base = f"{console_broker.console_url}/topics/{name}"
    for path, shows in (("", name), ("/partitions", "data-partition='0'"), ("/configs", name), ("/messages", name)):
        with urllib.request.urlopen(base + path, timeout=15) as response:
            assert response.status == 200 and shows in response.read().decode().replace('"', "'"), path
    assert _post(base + "/configs", {"config": "retention.ms", "value": "7200000"}) == (
        200, f"{base}/configs?set=retention.ms")
    assert topic_config(admin, name, "retention.ms").value == "7200000"
    status, page = _post(base + "/messages", {"key": "k", "value": "v", "headers": "", "partition": ""})
    assert status == 200 and page.startswith(f"{base}/messages"), page
    assert _post(base + "/partitions", {"total": "2"}) == (200, f"{base}?partitions=2")
    assert _post(base + "/delete", {"confirm": name}) == (
        200, f"{console_broker.console_url}/topics?deleted={name}")


def test_the_list_shows_each_topics_message_rate_live(browser: Browser, admin: AdminClient,
                                                      console_broker: BrokerProcess) -> None:
    _create(admin, "ct-rate")
    browser.open("/topics?q=ct-rate")
    rate = "#topics tr[data-topic='ct-rate'] .rate"
    browser.driver.execute_script("window.sameDocument = true")
    browser.wait_until(lambda: browser.text_of(rate) == "0.0", 15, "a first rate, from two samples")

    stop = time.monotonic() + 30
    shown = ""
    while time.monotonic() < stop:
        ck_produce(console_broker.bootstrap, "ct-rate", [{"value": b"r"}] * 50)
        shown = browser.text_of(rate) or ""
        if shown not in ("", "-", "0.0"):
            break
        time.sleep(0.5)
    assert float(shown) > 0, f"the rate stayed {shown!r}"
    assert browser.driver.execute_script("return window.sameDocument === true"), "the page was reloaded"
    browser.screenshot("topics-rates")

