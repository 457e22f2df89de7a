"""`moldau schemas` and the `--value-format` / `--key-format` options of `moldau produce` and `moldau consume`,
run as commands against the shared broker's schema registry; what they write is read back with confluent-kafka's
own deserializers, and what confluent-kafka's serializers write is shown by `moldau consume`."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, create_topic

REPO = Path(__file__).resolve().parents[2]
USER_V1 = {"type": "record", "name": "User", "namespace": "com.acme",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
USER_V2_NO_DEFAULT = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string"}]}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": ""}]}
ORDER_PROTO = """syntax = "proto3";
package acme;
message Order {
  string id = 1;
  int64 cents = 2;
  repeated string items = 3;
}
"""
ORDER_JSON_SCHEMA = {"type": "object", "title": "Order", "properties": {"id": {"type": "string"},
                                                                       "cents": {"type": "integer"}},
                     "required": ["id"], "additionalProperties": False}


def run(broker: BrokerProcess, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "moldau", *args]
    if args[0] == "schemas":
        command += ["--registry", broker.registry_url]
    else:
        command += ["-b", broker.bootstrap, "--registry", broker.registry_url]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=REPO, timeout=60)


def ok(broker: BrokerProcess, *args: str, stdin: str = "") -> str:
    result = run(broker, *args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    return result.stdout


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_schemas_register_evolve_check_config_and_delete(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    subject = name("cli-users")
    v1, v2, bad = tmp_path / "v1.avsc", tmp_path / "v2.avsc", tmp_path / "bad.avsc"
    v1.write_text(json.dumps(USER_V1))
    v2.write_text(json.dumps(USER_V2))
    bad.write_text(json.dumps(USER_V2_NO_DEFAULT))

    assert ok(shared_broker, "schemas", "register", subject, str(v1)).startswith(f"registered under {subject} as "
                                                                                 "version 1, id ")
    assert subject in ok(shared_broker, "schemas", "list").split()
    assert ok(shared_broker, "schemas", "list", subject).split() == ["1"]
    assert json.loads(ok(shared_broker, "schemas", "get", subject)) == USER_V1

    checked = run(shared_broker, "schemas", "check", subject, str(bad))
    assert checked.returncode == 1 and "incompatible" in checked.stdout
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in checked.stdout and "email" in checked.stdout, checked.stdout
    refused = run(shared_broker, "schemas", "register", subject, str(bad))
    assert refused.returncode == 1 and "error 40901" in refused.stderr, refused.stderr
    assert ok(shared_broker, "schemas", "check", subject, str(v2)).startswith("compatible")
    assert "version 2" in ok(shared_broker, "schemas", "register", subject, "-", stdin=json.dumps(USER_V2))

    assert ok(shared_broker, "schemas", "config", subject, "--set", "NONE").strip() == "NONE"
    assert ok(shared_broker, "schemas", "config", subject).strip() == "NONE"
    assert "version 3" in ok(shared_broker, "schemas", "register", subject, str(bad))
    assert ok(shared_broker, "schemas", "mode", subject).strip() == "READWRITE"
    assert json.loads(ok(shared_broker, "schemas", "config", subject, "-o", "json")) == {"compatibilityLevel": "NONE"}
    assert json.loads(ok(shared_broker, "schemas", "mode", subject, "--output", "json")) == {"mode": "READWRITE"}
    invalid = run(shared_broker, "schemas", "register", subject, "-", stdin='{"type": "recrod"}')
    assert invalid.returncode == 1 and "error 42201" in invalid.stderr, invalid.stderr

    assert "deleted" in ok(shared_broker, "schemas", "delete", subject, "--version", "3")
    assert ok(shared_broker, "schemas", "list", subject).split() == ["1", "2"]
    permanent_first = run(shared_broker, "schemas", "delete", subject, "--permanent")
    assert permanent_first.returncode == 1 and "error 40405" in permanent_first.stderr
    ok(shared_broker, "schemas", "delete", subject)
    assert "permanently deleted" in ok(shared_broker, "schemas", "delete", subject, "--permanent")
    missing = run(shared_broker, "schemas", "get", subject)
    assert missing.returncode == 1 and "error 40401" in missing.stderr


def test_schemas_with_a_reference(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    address, customer = name("cli-address"), name("cli-customer")
    ok(shared_broker, "schemas", "register", address, "-", stdin=json.dumps(
        {"type": "record", "name": "Address", "namespace": "com.acme", "fields": [{"name": "city", "type": "string"}]}))
    schema = {"type": "record", "name": "Customer", "namespace": "com.acme",
              "fields": [{"name": "home", "type": "com.acme.Address"}]}
    ok(shared_broker, "schemas", "register", customer, "-", "--reference", f"com.acme.Address={address}:1",
       stdin=json.dumps(schema))
    shown = json.loads(ok(shared_broker, "schemas", "get", customer, "--json"))
    assert shown["references"] == [{"name": "com.acme.Address", "subject": address, "version": 1}]
    bad_reference = run(shared_broker, "schemas", "register", customer, "-", "--reference", "com.acme.Address",
                        stdin=json.dumps(schema))
    assert bad_reference.returncode == 1 and "NAME=SUBJECT:VERSION" in bad_reference.stderr


def test_avro_records_written_by_the_tools_read_by_confluent_kafka(shared_broker: BrokerProcess,
                                                                   tmp_path: Path) -> None:
    topic = name("cli-avro")
    create_topic(shared_broker.bootstrap, topic)
    schema_file = tmp_path / "user.avsc"
    schema_file.write_text(json.dumps(USER_V1))
    users = [{"name": f"user {i}", "age": 20 + i} for i in range(5)]
    lines = "".join(f"{i}\t{json.dumps(u)}\n" for i, u in enumerate(users))
    ok(shared_broker, "produce", topic, "--value-format", "avro", "--value-schema", str(schema_file),
       "--key-separator", "\t", stdin=lines)

    client = SchemaRegistryClient({"url": shared_broker.registry_url})
    decode = AvroDeserializer(client)
    got = ck_consume(shared_broker.bootstrap, topic, 5)
    assert [decode(r.value, SerializationContext(topic, MessageField.VALUE)) for r in got] == users
    assert [r.key for r in got] == [str(i).encode() for i in range(5)]

    shown = ok(shared_broker, "consume", topic, "--from-beginning", "--max-messages", "5", "--value-format", "avro",
               "--format", "kv")
    assert [line.split("\t", 1) for line in shown.splitlines()] == [[str(i), json.dumps(u, separators=(",", ":"))]
                                                                    for i, u in enumerate(users)]
    # Without a schema file the subject's latest version is used; a line it does not fit is refused.
    more = run(shared_broker, "produce", topic, "--value-format", "avro", stdin=json.dumps(users[0]) + "\n")
    assert more.returncode == 0 and "produced 1 record" in more.stderr, more.stderr
    misfit = run(shared_broker, "produce", topic, "--value-format", "avro", stdin='{"name": "x"}\n')
    assert misfit.returncode == 1 and "line 1" in misfit.stderr, misfit.stderr


def test_records_from_confluent_serializers_shown_by_consume(shared_broker: BrokerProcess) -> None:
    topic = name("ck-avro")
    create_topic(shared_broker.bootstrap, topic)
    client = SchemaRegistryClient({"url": shared_broker.registry_url})
    encode = AvroSerializer(client, json.dumps(USER_V1))
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    producer.produce(topic, value=encode({"name": "ada", "age": 36}, SerializationContext(topic, MessageField.VALUE)))
    producer.flush(30)
    shown = ok(shared_broker, "consume", topic, "--from-beginning", "--max-messages", "1", "--value-format", "avro")
    assert json.loads(shown) == {"name": "ada", "age": 36}


def test_json_schema_and_protobuf_round_trip_through_the_tools(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    for fmt, suffix, schema in (("json", ".json", json.dumps(ORDER_JSON_SCHEMA)), ("protobuf", ".proto", ORDER_PROTO)):
        topic = name(f"cli-{fmt}")
        create_topic(shared_broker.bootstrap, topic)
        schema_file = tmp_path / f"order{suffix}"
        schema_file.write_text(schema)
        orders = [{"id": "o-1", "cents": 1250}, {"id": "o-2", "cents": 99}]
        ok(shared_broker, "produce", topic, "--value-format", fmt, "--value-schema", str(schema_file),
           stdin="".join(json.dumps(o) + "\n" for o in orders))
        shown = ok(shared_broker, "consume", topic, "--from-beginning", "--max-messages", "2", "--value-format", fmt)
        decoded = [json.loads(line) for line in shown.splitlines()]
        if fmt == "protobuf":  # Protobuf's JSON mapping writes int64 as a string
            decoded = [{**d, "cents": int(d["cents"])} for d in decoded]
        assert decoded == orders, (fmt, shown)
        subjects = ok(shared_broker, "schemas", "list").split()
        assert f"{topic}-value" in subjects
    misfit = run(shared_broker, "produce", topic, "--value-format", "protobuf", "--value-schema", str(schema_file),
                 stdin='{"id": "x", "nope": 1}\n')
    assert misfit.returncode == 1 and "line 1" in misfit.stderr, misfit.stderr
