import pytest

from moldau.security.sasl.jaas import PLAIN_LOGIN_MODULE, JaasConfigError, parse_jaas_config


def test_kafka_plain_example() -> None:
    jaas = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    assert jaas.login_module == PLAIN_LOGIN_MODULE
    assert jaas.control_flag == "required"
    assert (jaas.username, jaas.password) == ("admin", "admin-secret")
    assert jaas.users() == {"admin": "admin-secret", "alice": "alice-secret"}


def test_quoting_bare_values_and_escapes() -> None:
    jaas = parse_jaas_config(r'M optional a=bare b="with space; and = sign" c="q\"uote\\" user_x="";')
    assert dict(jaas.options) == {"a": "bare", "b": "with space; and = sign", "c": 'q"uote\\', "user_x": ""}
    assert jaas.users() == {"x": ""}


@pytest.mark.parametrize("text", [
    "M required a=b",  # no semicolon
    "M required a=b; N required;",  # two modules
    "M maybe a=b;",  # bad flag
    "M required a b;",  # not key=value
    'M required a="unterminated;',
    "M required a=b a=c;",  # duplicate
    "M;",
    'M required "k"=v;',
])
def test_malformed(text: str) -> None:
    with pytest.raises(JaasConfigError):
        parse_jaas_config(text)
