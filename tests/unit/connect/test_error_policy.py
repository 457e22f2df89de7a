"""errors.tolerance, the dead letter queue and its __connect.errors.* headers, logging and retries."""

from __future__ import annotations

import pytest

from moldau.connect.error_policy import DeadLetter, ErrorPolicy, Failure, Stage
from moldau.connect.errors import ConfigException, DataException, RetriableException


def failure(stage: Stage = Stage.VALUE_CONVERTER, error: BaseException | None = None) -> Failure:
    try:
        raise error or DataException("bad json")
    except Exception as e:
        caught = e
    return Failure(stage, "org.apache.kafka.connect.json.JsonConverter", caught, "pg-sink", 3, topic="orders",
                   partition=1, offset=42, key=b"k", value=b"{nope", headers=[("trace", b"x")])


def test_default_fails_the_task() -> None:
    decision = ErrorPolicy({}, sink=True).decide(failure())
    assert decision.fail and decision.dead_letter is None and decision.log_message is None


def test_tolerance_all_skips_and_sends_to_the_dead_letter_queue_with_context_headers() -> None:
    policy = ErrorPolicy({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq",
                          "errors.deadletterqueue.context.headers.enable": "true"}, sink=True)
    decision = policy.decide(failure())
    assert not decision.fail
    letter = decision.dead_letter
    assert isinstance(letter, DeadLetter) and letter.topic == "dlq"
    assert (letter.key, letter.value) == (b"k", b"{nope")
    headers = dict(letter.headers)
    assert headers["trace"] == b"x"
    assert headers["__connect.errors.topic"] == b"orders"
    assert headers["__connect.errors.partition"] == b"1"
    assert headers["__connect.errors.offset"] == b"42"
    assert headers["__connect.errors.connector.name"] == b"pg-sink"
    assert headers["__connect.errors.task.id"] == b"3"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.class.name"] == b"org.apache.kafka.connect.json.JsonConverter"
    assert headers["__connect.errors.exception.class.name"] == b"moldau.connect.errors.DataException"
    assert headers["__connect.errors.exception.message"] == b"bad json"
    stack = headers["__connect.errors.exception.stacktrace"]
    assert stack is not None and b"DataException: bad json" in stack


def test_dead_letters_carry_no_context_headers_unless_enabled_and_only_for_sinks() -> None:
    config = {"errors.tolerance": "ALL", "errors.deadletterqueue.topic.name": "dlq"}
    letter = ErrorPolicy(config, sink=True).decide(failure()).dead_letter
    assert letter is not None and letter.headers == [("trace", b"x")]
    assert ErrorPolicy(config, sink=False).decide(failure()).dead_letter is None


def test_put_errors_are_never_tolerated() -> None:
    assert ErrorPolicy({"errors.tolerance": "all"}, sink=True).decide(failure(Stage.TASK_PUT)).fail


def test_log_messages() -> None:
    policy = ErrorPolicy({"errors.tolerance": "all", "errors.log.enable": "true"}, sink=True)
    message = policy.decide(failure(Stage.TRANSFORMATION)).log_message
    assert message == ("Error encountered in task pg-sink-3. Executing stage 'TRANSFORMATION' with class "
                       "'org.apache.kafka.connect.json.JsonConverter', where consumed record is "
                       "{topic='orders', partition=1, offset=42}.")
    verbose = ErrorPolicy({"errors.log.enable": "true", "errors.log.include.messages": "true"}, sink=True)
    text = verbose.decide(failure()).log_message
    assert text is not None and "value b'{nope'" in text


def test_retries_back_off_within_the_timeout() -> None:
    policy = ErrorPolicy({"errors.retry.timeout": "1000", "errors.retry.delay.max.ms": "500"}, sink=True)
    transient = RetriableException("busy")
    assert policy.retry_delay_ms(transient, 1, 0) == 300
    assert policy.retry_delay_ms(transient, 2, 300) == 500
    assert policy.retry_delay_ms(transient, 3, 900) == 100
    assert policy.retry_delay_ms(transient, 4, 1000) is None
    assert policy.retry_delay_ms(DataException("x"), 1, 0) is None
    assert ErrorPolicy({}, sink=True).retry_delay_ms(transient, 1, 0) is None


def test_bad_options_are_named() -> None:
    with pytest.raises(ConfigException, match=r"errors\.tolerance"):
        ErrorPolicy({"errors.tolerance": "some"}, sink=True)
    with pytest.raises(ConfigException, match=r"errors\.log\.enable"):
        ErrorPolicy({"errors.log.enable": "yes"}, sink=True)
