"""The message browser, the produce form and the schema pages in a real browser, against records written by
real clients (confluent-kafka, with its AvroSerializer registering in the broker's own schema registry)."""

from __future__ import annotations

import datetime
import json
import urllib.parse
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from selenium.webdriver.support.select import Select

from moldau.registry.formats.protobuf import ProtobufFormat
from tests.support.broker_process import BrokerProcess
from tests.support.browser import Browser
from tests.support.clients import RECENT_TIMESTAMP_MS, ck_produce, create_topic

ORDER_SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                           "fields": [{"name": "id", "type": "int"}, {"name": "item", "type": "string"}]})
READING_PROTO = """syntax = "proto3";
package plant;
message Reading { string sensor = 1; double celsius = 2; }
"""
PRICE_SCHEMA = json.dumps({"type": "object", "properties": {"sku": {"type": "string"}, "cents": {"type": "integer"}},
                           "required": ["sku", "cents"]})
BASE_TS_MS = RECENT_TIMESTAMP_MS  # whole seconds


def shown_offsets(browser: Browser) -> list[tuple[int, int]]:
    return [(int(row.get_attribute("data-partition") or -1), int(row.get_attribute("data-offset") or -1))
            for row in browser.find_all("#records tbody tr")]


def messages_path(topic: str, **params: object) -> str:
    return f"/topics/{topic}/messages?" + urllib.parse.urlencode(params)


@pytest.fixture(scope="module")
def seek_topic(console_broker: BrokerProcess) -> str:
    """20 records in one partition, key k<i>, timestamps a second apart."""
    create_topic(console_broker.bootstrap, "msg-seek")
    ck_produce(console_broker.bootstrap, "msg-seek",
               [{"key": f"k{i}", "value": f"value {i}", "timestamp": BASE_TS_MS + i * 1000} for i in range(20)])
    return "msg-seek"


def test_a_record_produced_through_the_form_is_browsed(browser: Browser, console_broker: BrokerProcess) -> None:
    create_topic(console_broker.bootstrap, "msg-form", partitions=2)
    browser.open("/topics/msg-form/messages")
    assert browser.find("#no-records")
    browser.find("#produce summary").click()
    form = browser.find("#produce-form")
    form.find_element("name", "key").send_keys("order-1")
    form.find_element("name", "partition").send_keys("1")
    form.find_element("name", "value").send_keys('{"id": 1, "item": "tea"}')
    form.find_element("name", "headers").send_keys("source=console\ntrace=<b>abc-1</b>")
    form.submit()
    browser.wait_for("#produced")
    browser.settle()

    assert browser.find("#produced").text.startswith("Produced to partition 1 at offset 0")
    assert shown_offsets(browser) == [(1, 0)]
    row = browser.find("#records tbody tr")
    assert row.find_element("css selector", ".key pre").text == "order-1"
    assert row.find_element("css selector", ".value pre").text == '{\n  "id": 1,\n  "item": "tea"\n}'
    headers = [h.text for h in row.find_elements("css selector", ".header")]
    assert headers == ["source=console", "trace=<b>abc-1</b>"]  # shown as text, never as markup
    browser.screenshot("messages-produced")


def test_a_refused_record_shows_the_error_beside_the_form(browser: Browser, console_broker: BrokerProcess) -> None:
    create_topic(console_broker.bootstrap, "msg-refused")
    browser.open("/topics/msg-refused/messages")
    browser.find("#produce summary").click()
    form = browser.find("#produce-form")
    form.find_element("name", "value").send_keys("lost")
    form.find_element("name", "partition").send_keys("7")
    form.submit()
    browser.wait_for("#produce-error")
    assert "UNKNOWN_PARTITION" in browser.find("#produce-error").text
    assert browser.find("#produce-form textarea[name=value]").get_attribute("value") == "lost"

    create_topic(console_broker.bootstrap, "msg-validated", config={"confluent.value.schema.validation": "true"})
    browser.open("/topics/msg-validated/messages")
    browser.find("#produce summary").click()
    browser.find("#produce-form textarea[name=value]").send_keys("not in the wire format")
    browser.find("#produce-form").submit()
    browser.wait_for("#produce-error")
    assert "INVALID_RECORD" in browser.find("#produce-error").text
    assert browser.find("#no-records")
    browser.screenshot("messages-refused")
    browser.console_errors()  # the pages' own 4xx statuses are logged by the browser; that is this test's point


def test_avro_values_are_decoded_with_a_link_to_their_schema(browser: Browser,
                                                             console_broker: BrokerProcess) -> None:
    create_topic(console_broker.bootstrap, "msg-avro")
    registry = SchemaRegistryClient({"url": console_broker.registry_url})
    serialize = AvroSerializer(registry, ORDER_SCHEMA)
    context = SerializationContext("msg-avro", MessageField.VALUE)
    producer = Producer({"bootstrap.servers": console_broker.bootstrap})
    for i, item in enumerate(["coffee", "scone"]):
        producer.produce("msg-avro", key=f"order-{i}", value=serialize({"id": i, "item": item}, context))
    assert producer.flush(10) == 0
    schema_id = registry.get_latest_version("msg-avro-value").schema_id

    browser.open("/topics/msg-avro/messages")

    values = [cell.text for cell in browser.find_all("#records .value pre")]
    assert values == ['{\n  "id": 0,\n  "item": "coffee"\n}', '{\n  "id": 1,\n  "item": "scone"\n}']
    link = browser.find("#records .value a.badge.schema")
    assert link.text == f"Avro · schema {schema_id} · msg-avro-value v1"
    browser.screenshot("messages-avro")
    link.click()
    browser.settle()
    assert browser.driver.current_url.endswith("/schemas/msg-avro-value#v1")
    assert browser.find("#compatibility").text == "BACKWARD"
    assert '"name": "Order"' in browser.find("#v1 pre.schema").text
    browser.screenshot("schemas-subject")

    browser.open("/schemas")
    row = browser.find('#subjects tr[data-subject="msg-avro-value"]')
    assert row.text.split() == ["msg-avro-value", "1", str(schema_id), "AVRO", "BACKWARD"]
    browser.screenshot("schemas")
    browser.open(f"/schemas/ids/{schema_id}")
    assert browser.driver.current_url.endswith("/schemas/msg-avro-value#v1")


def test_a_schema_with_references_decodes_and_links_them(browser: Browser, console_broker: BrokerProcess) -> None:
    create_topic(console_broker.bootstrap, "msg-priced")
    registry = SchemaRegistryClient({"url": console_broker.registry_url})
    money = json.dumps({"type": "record", "name": "Money", "namespace": "shop",
                        "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}]})
    priced = json.dumps({"type": "record", "name": "Priced", "namespace": "shop",
                         "fields": [{"name": "sku", "type": "string"}, {"name": "price", "type": "shop.Money"}]})
    registry.register_schema("money", Schema(money, "AVRO"))
    priced_id = registry.register_schema(
        "msg-priced-value", Schema(priced, "AVRO", [SchemaReference("shop.Money", "money", 1)]))
    serialize = AvroSerializer(registry, None, conf={"auto.register.schemas": False, "use.latest.version": True})
    value = serialize({"sku": "tea", "price": {"cents": 450, "currency": "EUR"}},
                      SerializationContext("msg-priced", MessageField.VALUE))
    ck_produce(console_broker.bootstrap, "msg-priced", [{"value": value}])

    browser.open("/topics/msg-priced/messages")
    assert json.loads(browser.find("#records .value pre").text) == {
        "sku": "tea", "price": {"cents": 450, "currency": "EUR"}}
    assert browser.find("#records .value a.badge.schema").text == f"Avro · schema {priced_id} · msg-priced-value v1"
    browser.open("/schemas/msg-priced-value")
    reference = browser.find("#v1 .references a")
    assert (reference.text, reference.get_attribute("href")) == ("shop.Money", f"{browser.base_url}/schemas/money#v1")


def test_protobuf_json_schema_and_avro_keys_are_decoded(browser: Browser, console_broker: BrokerProcess) -> None:
    create_topic(console_broker.bootstrap, "msg-formats")
    registry = SchemaRegistryClient({"url": console_broker.registry_url})
    reading = ProtobufFormat().parse(READING_PROTO, {}).message_class((0,))
    write_reading = ProtobufSerializer(reading, registry, {"use.deprecated.format": False})
    write_price = JSONSerializer(PRICE_SCHEMA, registry, conf={"subject.name.strategy": lambda ctx, name: "prices"})
    write_key = AvroSerializer(registry, '"string"')
    value_context = SerializationContext("msg-formats", MessageField.VALUE)
    key_context = SerializationContext("msg-formats", MessageField.KEY)
    producer = Producer({"bootstrap.servers": console_broker.bootstrap})
    producer.produce("msg-formats", key=write_key("sensor-7", key_context),
                     value=write_reading(reading(sensor="s7", celsius=21.5), value_context))
    producer.produce("msg-formats", value=write_price({"sku": "tea", "cents": 450}, value_context))
    assert producer.flush(10) == 0

    browser.open("/topics/msg-formats/messages")

    values = [cell.text for cell in browser.find_all("#records .value pre")]
    assert values == ['{\n  "sensor": "s7",\n  "celsius": 21.5\n}', '{\n  "sku": "tea",\n  "cents": 450\n}']
    badges = [badge.text for badge in browser.find_all("#records .value a.badge.schema")]
    assert badges[0].startswith("Protobuf · schema ") and badges[0].endswith(" · msg-formats-value v1")
    assert badges[1].startswith("JSON Schema · schema ") and badges[1].endswith(" · prices v1")
    assert browser.find("#records .key pre").text == '"sensor-7"'
    assert browser.find("#records .key a.badge.schema").text.endswith("msg-formats-key v1")
    browser.open(messages_path("msg-formats", q="sensor-7", search="key"))
    assert shown_offsets(browser) == [(0, 0)]


def test_the_form_makes_a_linkable_view(browser: Browser, seek_topic: str) -> None:
    browser.open(f"/topics/{seek_topic}/messages")
    form = browser.find("#browse-form")
    Select(form.find_element("name", "from")).select_by_value("offset")
    form.find_element("name", "offset").send_keys("7")
    count = form.find_element("name", "count")
    count.clear()
    count.send_keys("2")
    form.find_element("css selector", "button[type=submit]").click()
    browser.wait_until(lambda: "offset=7" in browser.driver.current_url, what="the form's view in the address")
    browser.settle()
    assert shown_offsets(browser) == [(0, 7), (0, 8)]
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(browser.driver.current_url).query, True))
    assert query == {"partition": "", "from": "offset", "offset": "7", "timestamp": "", "count": "2", "q": "",
                     "search": "text"}


def test_reading_from_an_offset_a_timestamp_or_the_end(browser: Browser, seek_topic: str) -> None:
    browser.open(messages_path(seek_topic, partition=0, **{"from": "offset"}, offset=5, count=3))
    assert shown_offsets(browser) == [(0, 5), (0, 6), (0, 7)]
    assert [k.text for k in browser.find_all("#records .key pre")] == ["k5", "k6", "k7"]

    browser.open(messages_path(seek_topic, **{"from": "timestamp"}, timestamp=BASE_TS_MS + 10_000, count=2))
    assert shown_offsets(browser) == [(0, 10), (0, 11)]
    shown_at = datetime.datetime.fromtimestamp((BASE_TS_MS + 10_000) / 1000, datetime.UTC)
    assert browser.find("#records .timestamp").text.startswith(shown_at.strftime("%Y-%m-%d %H:%M:%S.000Z"))

    browser.open(messages_path(seek_topic, **{"from": "end"}, count=4))
    assert shown_offsets(browser) == [(0, 16), (0, 17), (0, 18), (0, 19)]
    browser.find("#older").click()
    browser.settle()
    assert shown_offsets(browser) == [(0, 12), (0, 13), (0, 14), (0, 15)]
    browser.find("#newer").click()
    browser.settle()
    assert shown_offsets(browser) == [(0, 16), (0, 17), (0, 18), (0, 19)]
    assert not browser.find_all("#newer")

    browser.open(messages_path(seek_topic, **{"from": "beginning"}, count=5))
    assert shown_offsets(browser) == [(0, i) for i in range(5)]
    assert not browser.find_all("#older")


def test_search_by_key_and_by_text(browser: Browser, console_broker: BrokerProcess) -> None:
    create_topic(console_broker.bootstrap, "msg-search", partitions=3)
    records: list[dict[str, Any]] = [{"key": f"user-{i}", "value": f"hello {i}"} for i in range(300)]
    records[137] = {"key": "special", "value": "a Needle in the haystack", "headers": [("kind", b"rare")]}
    positions = ck_produce(console_broker.bootstrap, "msg-search", records)

    browser.open(messages_path("msg-search", q="special", search="key", **{"from": "beginning"}))
    assert shown_offsets(browser) == [positions[137]]
    assert "300 scanned" in browser.find("#summary").text

    browser.open(messages_path("msg-search", q="needle"))
    assert shown_offsets(browser) == [positions[137]]
    assert browser.find("#records .value pre").text == "a Needle in the haystack"
    browser.open(messages_path("msg-search", q="kind=rare"))
    assert shown_offsets(browser) == [positions[137]]
    assert not browser.find_all("#scan-bound")
    browser.screenshot("messages-search")


def test_a_search_says_when_it_hit_its_bound(browser: Browser, console_broker: BrokerProcess) -> None:
    create_topic(console_broker.bootstrap, "msg-bound")
    ck_produce(console_broker.bootstrap, "msg-bound", [{"value": b"x"} for _ in range(10_050)])
    browser.open(messages_path("msg-bound", q="absent", **{"from": "beginning"}))
    assert "0 records matching" in browser.find("#summary").text
    assert "10000 scanned" in browser.find("#summary").text
    assert "10000 records" in browser.find("#scan-bound").text
    browser.find("#newer").click()  # on from where the search stopped
    browser.settle()
    assert "50 scanned" in browser.find("#summary").text and not browser.find_all("#scan-bound")


def test_binary_values_and_the_dark_theme(browser: Browser, console_broker: BrokerProcess) -> None:
    create_topic(console_broker.bootstrap, "msg-binary")
    ck_produce(console_broker.bootstrap, "msg-binary", [{"key": b"\x00\xff\x10", "value": bytes(range(40))}])
    browser.open("/topics/msg-binary/messages")
    browser.driver.execute_script("localStorage.setItem('moldau-theme', 'dark')")
    browser.open("/topics/msg-binary/messages")
    assert browser.find("#records .key pre").text == "00 ff 10"
    assert browser.find("#records .value pre").text.splitlines()[0] == "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"
    browser.screenshot("messages-dark")
    browser.driver.execute_script("localStorage.removeItem('moldau-theme')")


def test_an_unknown_topic_or_a_bad_query_is_named(browser: Browser, seek_topic: str) -> None:
    browser.open("/topics/msg-no-such-topic/messages")
    assert browser.find("h1").text == "Error 404"
    assert browser.find(".error").text == "there is no topic 'msg-no-such-topic'"
    browser.open(messages_path(seek_topic, count=9999))
    assert browser.find("h1").text == "Error 400"
    assert browser.find(".error").text == "count must be between 1 and 500"
    browser.open(messages_path(seek_topic, partition=4))
    assert browser.find(".error").text == "the topic has no partition 4 (it has 1)"
    browser.open("/schemas/no-such-subject")
    assert browser.find("h1").text == "Error 404" and "not found" in browser.find(".error").text.lower()
    browser.console_errors()  # the browser logs the pages' own error statuses; that is this test's point
