"""The overview page in a real browser: the cluster, its brokers and partition health."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.support.broker_process import BrokerProcess
from tests.support.browser import Browser


def test_overview_shows_the_cluster_and_its_brokers(browser: Browser, console_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": console_broker.bootstrap})
    created = admin.create_topics([NewTopic("overview-topic", num_partitions=3, replication_factor=1)])
    created["overview-topic"].result(10)

    browser.open("/")

    assert browser.driver.title.startswith("Overview")
    rows = [row.text for row in browser.find_all("#brokers tbody tr")]
    assert len(rows) == 1 and rows[0].startswith("1 127.0.0.1"), rows
    assert int(browser.find("#partition-count").text) >= 3
    assert browser.find("#under-replicated").text == "0"
    assert browser.find("#offline").text == "0"
    assert browser.find("nav a[aria-current=page]").text == "Overview"
    charts = browser.find_all("[data-throughput]")
    assert [chart.get_attribute("data-topic") for chart in charts] == [""]  # the chart of all topics
    browser.screenshot("overview")


def test_theme_switch_is_remembered(browser: Browser) -> None:
    browser.open("/")
    html = browser.find("html")
    before = html.get_attribute("data-theme")
    browser.find("#theme-toggle").click()
    after = html.get_attribute("data-theme")
    assert after != before
    browser.open("/")
    assert browser.find("html").get_attribute("data-theme") == after
    browser.driver.execute_script("localStorage.setItem('moldau-theme', 'dark')")
    browser.open("/")
    browser.screenshot("overview-dark")
    browser.driver.execute_script("localStorage.removeItem('moldau-theme')")


def test_an_unknown_path_is_not_found(browser: Browser) -> None:
    browser.open("/no-such-page")
    assert "Not Found" in browser.find("body").text
    browser.console_errors()  # the 404 itself is logged by the browser; that is the point of this request
