"""The group pages and throughput charts in a real browser: lag per partition that falls to 0 live while a consumer
catches up, resetting offsets and deleting a group through the forms (and the broker's refusal while the group has
members), a share group with its type and start offsets, and charts that draw new points while records arrive."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from confluent_kafka import Consumer, ShareConsumer, TopicPartition
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.support.select import Select

from moldau.cli.share_groups import describe_share_group
from tests.support.broker_process import BrokerProcess
from tests.support.browser import Browser
from tests.support.console_groups import (
    commit,
    committed,
    create_topic,
    get_json,
    peer_ports,
    produce,
    share_from_earliest,
)
from tests.support.messages import partition_of
from tests.support.polling import wait_until


def offsets_table(browser: Browser) -> dict[str, tuple[str, str, str]] | None:
    """partition -> (committed or start offset, end offset, lag) as the page shows them."""
    try:
        return {row.get_attribute("data-partition") or "": (
            row.find_element("css selector", ".offset").text, row.find_element("css selector", ".end").text,
            row.find_element("css selector", ".lag").text) for row in browser.find_all("#offsets tbody tr")}
    except StaleElementReferenceException:
        return None


def eventually(browser: Browser, condition: Callable[[], Any], what: str, timeout_s: float = 20.0) -> None:
    browser.wait_until(condition, timeout_s, what)


def submit(browser: Browser, button: str) -> None:
    """Click a form's submit button and wait for the page the server answers with."""
    browser.submit(button)


def submit_reset(browser: Browser, topic: str, to: str, value: str = "") -> None:
    Select(browser.find("#reset-topic")).select_by_value(topic)
    browser.find(f"#reset-to-{to}").click()
    if to in ("offset", "timestamp"):
        field = browser.find(f"#reset-{to}")
        field.clear()
        field.send_keys(value)
    submit(browser, "#reset-submit")


def test_lag_per_partition_falls_to_zero_live_as_the_consumer_catches_up(
        browser: Browser, console_broker: BrokerProcess) -> None:
    bootstrap, topic, group = console_broker.bootstrap, "lag-topic", "lag-group"
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, {0: 10, 1: 10, 2: 10})
    commit(bootstrap, group, {(topic, 0): 4, (topic, 1): 10, (topic, 2): 0})

    browser.open(f"/groups/{group}")
    assert offsets_table(browser) == {f"{topic}:0": ("4", "10", "6"), f"{topic}:1": ("10", "10", "0"),
                                      f"{topic}:2": ("0", "10", "10")}
    assert browser.find("#total-lag").text == "16"
    assert browser.find("#group-type").text == "classic"
    browser.screenshot("groups-detail-behind")
    browser.driver.execute_script("window.sameDocument = true")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "lag-catcher",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        received = 0

        def caught_up() -> bool:
            nonlocal received
            message = consumer.poll(0.2)
            received += message is not None and message.error() is None
            return received == 16
        wait_until(caught_up, 30, "the consumer to read the 16 records behind")
        consumer.commit(asynchronous=False)

        eventually(browser, lambda: browser.text_of("#total-lag") == "0", "the total lag to fall to 0")
        assert offsets_table(browser) == {f"{topic}:{p}": ("10", "10", "0") for p in range(3)}
        eventually(browser, lambda: browser.text_of("#members tbody tr") is not None, "the member to show")
        member = browser.find("#members tbody tr").text
        assert member.startswith("lag-catcher") and f"{topic}:0,1,2" in member, member
        assert browser.driver.execute_script("return window.sameDocument === true"), "the page was reloaded"
        browser.screenshot("groups-detail")
    finally:
        consumer.close()


def test_a_consumer_protocol_group_shows_its_type_assignor_and_lag(browser: Browser,
                                                                   console_broker: BrokerProcess) -> None:
    bootstrap, topic, group = console_broker.bootstrap, "kip848-topic", "kip848-group"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, {0: 5, 1: 5})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "client.id": "new-protocol", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        seen: dict[int, int] = {}

        def read_all() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen[partition_of(message)] = seen.get(partition_of(message), 0) + 1
            return sum(seen.values()) == 10
        wait_until(read_all, 30, "the consumer to read all 10 records")
        consumer.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 5)], asynchronous=False)

        browser.open("/groups")
        row = browser.find(f'tr[data-group="{group}"]').text
        assert row.split() == [group, "consumer", "Stable", "consumer", "uniform", "1", "3"], row
        browser.open(f"/groups/{group}")
        assert browser.find("#group-protocol").text == "consumer"
        assert offsets_table(browser) == {f"{topic}:0": ("2", "5", "3"), f"{topic}:1": ("5", "5", "0")}
        assert browser.find("#members tbody tr").text.startswith("new-protocol")
    finally:
        consumer.close()


def test_reset_offsets_through_the_form_on_an_empty_group(browser: Browser, console_broker: BrokerProcess) -> None:
    bootstrap, topic, group = console_broker.bootstrap, "reset-topic", "reset-group"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, {0: 8, 1: 8})
    commit(bootstrap, group, {(topic, 0): 8, (topic, 1): 8})
    browser.open(f"/groups/{group}")
    assert browser.find("#total-lag").text == "0"

    submit_reset(browser, topic, "offset", "3")
    assert browser.find("#reset-notice").text == "Reset 2 offsets."
    assert committed(bootstrap, group) == {(topic, 0): 3, (topic, 1): 3}
    assert browser.find("#total-lag").text == "10"

    submit_reset(browser, "", "earliest")  # every topic it has offsets for
    assert committed(bootstrap, group) == {(topic, 0): 0, (topic, 1): 0}

    submit_reset(browser, topic, "timestamp", "2100-01-01T00:00:00")  # no record that late: the end
    assert committed(bootstrap, group) == {(topic, 0): 8, (topic, 1): 8}

    submit_reset(browser, topic, "offset", "x")
    assert "the offset must be a number" in browser.find("#reset-error").text
    assert all("400" in error for error in browser.console_errors())  # the page itself answered 400

    # The list's lag is live too: a commit from elsewhere shows without reloading.
    browser.open("/groups")
    lag = f'tr[data-group="{group}"] .lag'
    assert browser.find(lag).text == "0"
    browser.driver.execute_script("window.sameDocument = true")
    commit(bootstrap, group, {(topic, 0): 3, (topic, 1): 3})
    eventually(browser, lambda: browser.text_of(lag) == "10", "the list to show the new lag")
    assert browser.driver.execute_script("return window.sameDocument === true"), "the page was reloaded"


def test_a_group_with_members_is_refused_with_the_brokers_error(browser: Browser,
                                                                console_broker: BrokerProcess) -> None:
    bootstrap, topic, group = console_broker.bootstrap, "busy-topic", "busy-group"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, {0: 3})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:

        def assigned() -> bool:
            consumer.poll(0.2)
            return bool(consumer.assignment())
        wait_until(assigned, 30, "the consumer to join the group")
        browser.open(f"/groups/{group}")
        assert browser.find("#group-state").text == "Stable"
        submit_reset(browser, topic, "earliest")
        error = browser.find("#reset-error").text
        assert error.startswith("UNKNOWN_MEMBER_ID") and "no members" in error, error
        browser.driver.execute_script("document.getElementById('reset-error').scrollIntoView()")
        browser.screenshot("groups-reset-refused")
        browser.find("#delete-confirm").send_keys(group)
        submit(browser, "#delete-submit")
        assert browser.find("#delete-error").text.startswith("NON_EMPTY_GROUP")
        assert all("409" in error for error in browser.console_errors())
    finally:
        consumer.close()

    browser.find("#delete-confirm").send_keys("not-the-name")
    submit(browser, "#delete-submit")
    assert "type the group's name" in browser.find("#delete-error").text
    browser.console_errors()  # that answer was a 400
    browser.find("#delete-confirm").send_keys(group)
    submit(browser, "#delete-submit")
    assert browser.driver.current_url.endswith(f"/groups?deleted={group}")
    assert f"Deleted group {group}." in browser.find(".notice").text
    assert not browser.find_all(f'tr[data-group="{group}"]')


def test_a_share_group_shows_its_type_members_and_start_offsets(browser: Browser,
                                                                console_broker: BrokerProcess) -> None:
    bootstrap, topic, group = console_broker.bootstrap, "share-topic", "console-share"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, {0: 12})
    share_from_earliest(bootstrap, group)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "sharer"})
    consumer.subscribe([topic])
    try:
        received: list[Any] = []

        def all_delivered() -> bool:
            received.extend(m for m in consumer.poll(0.5) if m.error() is None)
            return len(received) >= 12
        wait_until(all_delivered, 30, "the share consumer to get the 12 records")
        consumer.poll(0.5)  # acknowledges what the last poll delivered

        browser.open("/groups")
        row = browser.find(f'tr[data-group="{group}"]')
        assert row.find_element("css selector", ".type").text == "share"
        assert row.find_element("css selector", ".members").text == "1"
        browser.screenshot("groups")

        browser.open(f"/groups/{group}")
        assert browser.find("#group-type").text == "share"
        eventually(browser, lambda: offsets_table(browser) == {f"{topic}:0": ("12", "12", "0")},
                   "the start offset to pass the acknowledged records")
        member = browser.find("#members tbody tr").text
        assert member.startswith("sharer") and f"{topic}:0" in member, member
        browser.screenshot("groups-share")
        browser.driver.execute_script("localStorage.setItem('moldau-theme', 'dark')")
        browser.open("/groups")
        browser.screenshot("groups-dark")
        browser.driver.execute_script("localStorage.removeItem('moldau-theme')")
    finally:
        consumer.close()

    # Empty now: its start offset can go back, and all 12 records are to be delivered again.
    browser.open(f"/groups/{group}")
    eventually(browser, lambda: browser.text_of("#member-count") == "0", "the share consumer to leave")
    submit_reset(browser, topic, "earliest")
    assert browser.find("#reset-notice").text == "Reset 1 offset."
    view = describe_share_group(bootstrap, group)
    assert [(p.partition, p.start_offset, p.lag) for p in view.partitions] == [(0, 0, 12)]
    assert offsets_table(browser) == {f"{topic}:0": ("0", "12", "12")}


def test_group_ids_with_slashes_and_other_reserved_characters(browser: Browser,
                                                             console_broker: BrokerProcess) -> None:
    bootstrap, topic = console_broker.bootstrap, "slash-topic"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, {0: 5})
    group, lookalike = "team/a b?#%", "slash-group/live"  # the second looks like the first's live fragment
    commit(bootstrap, group, {(topic, 0): 2})
    commit(bootstrap, lookalike, {(topic, 0): 4})

    browser.open("/groups")
    browser.find(f'tr[data-group="{group}"] a').click()  # the list links to the group's own page
    browser.settle()
    assert browser.driver.current_url.endswith("/groups/" + quote(group, safe=""))
    assert group in browser.find("h1").text
    assert offsets_table(browser) == {f"{topic}:0": ("2", "5", "3")}
    browser.driver.execute_script("window.sameDocument = true")
    commit(bootstrap, group, {(topic, 0): 1})  # the live fragment, at the encoded path, follows
    eventually(browser, lambda: offsets_table(browser) == {f"{topic}:0": ("1", "5", "4")}, "the live table")
    assert browser.driver.execute_script("return window.sameDocument === true")

    submit_reset(browser, topic, "latest")
    assert browser.find("#reset-notice").text == "Reset 1 offset."
    assert committed(bootstrap, group) == {(topic, 0): 5}
    assert committed(bootstrap, lookalike) == {(topic, 0): 4}, "the other group was left alone"

    with urllib.request.urlopen(f"{console_broker.console_url}/groups/{quote(lookalike, safe='')}") as page:
        assert "<h1" in (html := page.read().decode()) and lookalike in html  # a page, not a fragment of another

    browser.find("#delete-form [name=confirm]").send_keys(group)
    submit(browser, "#delete-submit")
    assert browser.driver.current_url.endswith("/groups?deleted=" + quote(group, safe=""))
    assert not browser.find_all(f'tr[data-group="{group}"]')


def test_refreshes_reuse_the_users_connections(browser: Browser, console_broker: BrokerProcess) -> None:
    """Pages that use Moldau's own client (groups, brokers' log dirs, quorum, quotas, tokens) keep one pooled connection
    per broker for the user instead of opening one per page or refresh."""
    bootstrap, topic, group = console_broker.bootstrap, "pool-topic", "pool-group"
    create_topic(bootstrap, topic, 1)
    commit(bootstrap, group, {(topic, 0): 0})
    pages = ["/groups", f"/groups/{group}", f"/groups/{group}/live", "/brokers", "/", "/overview/quorum",
             "/quotas", "/tokens", "/topics"]

    def visit_all() -> None:
        for path in pages:
            with urllib.request.urlopen(console_broker.console_url + path, timeout=15) as response:
                assert response.status == 200, path

    visit_all()  # the console's clients connect once
    broker_port = int(bootstrap.rsplit(":", 1)[1])
    before = peer_ports(broker_port)
    for _ in range(4):
        visit_all()
    browser.open(f"/groups/{group}")
    time.sleep(4.5)  # the live table refreshes twice
    new = peer_ports(broker_port) - before
    assert not new, f"the console opened {len(new)} new connections to the broker while pages refreshed"


CHART_POINTS = "return (window.moldauCharts && window.moldauCharts[arguments[0]]) ? " \
               "window.moldauCharts[arguments[0]].messages.data[0].length : -1"
CHART_MAX_IN = "return Math.max(0, ...window.moldauCharts[arguments[0]].messages.data[1])"


def test_throughput_charts_draw_new_points_while_records_arrive(browser: Browser,
                                                               console_broker: BrokerProcess) -> None:
    bootstrap, topic = console_broker.bootstrap, "throughput-topic"
    api = f"{console_broker.console_url}/api/throughput"
    browser.open("/throughput")
    browser.driver.execute_script("window.sameDocument = true")
    # Two samples (one rate) before the topic exists, so everything produced to it falls inside the window.
    eventually(browser, lambda: browser.driver.execute_script(CHART_POINTS, "*") >= 1, "the first rates")
    before = browser.driver.execute_script(CHART_POINTS, "*")

    create_topic(bootstrap, topic, 2)
    for _ in range(3):
        produce(bootstrap, topic, {0: 50, 1: 50}, size=100)

    def counted() -> bool:
        series = get_json(f"{api}?topic={topic}")
        moved = sum(rate * (t - t0) for rate, t, t0 in zip(series["messages_in"][1:], series["t"][1:],
                                                            series["t"], strict=False))
        return bool(series["totals"]["messages_in"] == 300 and round(moved) == 300)
    eventually(browser, counted, "the endpoint to count the 300 records produced")
    series = get_json(f"{api}?topic={topic}")
    assert series["totals"]["bytes_in"] > 300 * 100
    assert series["sources"]["bytes_in"].startswith("this node")

    eventually(browser, lambda: browser.driver.execute_script(CHART_POINTS, "*") > before, "new points")
    eventually(browser, lambda: browser.driver.execute_script(CHART_MAX_IN, "*") > 0, "a rate above 0")

    # The topic is busy now: a chart of its own appears, without reloading.
    eventually(browser, lambda: browser.driver.execute_script(CHART_POINTS, topic) >= 1, "the topic's chart")
    assert len(browser.find_all(f'[data-throughput][data-topic="{topic}"]')) == 1
    assert browser.find(f'[data-topic="{topic}"] h3').text == topic
    assert browser.driver.execute_script(CHART_MAX_IN, topic) > 0
    totals = browser.driver.execute_script(f"return window.moldauCharts['{topic}'].data.totals")
    assert totals["messages_in"] == 300
    assert not browser.find("#no-busy-topics").is_displayed()
    assert browser.driver.execute_script("return window.sameDocument === true"), "the page was reloaded"
    browser.screenshot("throughput")

    browser.open("/throughput")  # and it is drawn by the server on the next visit
    assert len(browser.find_all(f'[data-throughput][data-topic="{topic}"]')) == 1
    browser.driver.execute_script("localStorage.setItem('moldau-theme', 'dark')")
    browser.open("/throughput")
    eventually(browser, lambda: browser.driver.execute_script(CHART_POINTS, topic) >= 1, "the dark chart")
    browser.screenshot("throughput-dark")
    browser.driver.execute_script("localStorage.removeItem('moldau-theme')")
