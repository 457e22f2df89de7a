"""StringConverter and ByteArrayConverter: keys and values as text or as raw bytes, without schemas in the
data (reads yield the optional STRING / BYTES schema); SimpleHeaderConverter: header values as text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from moldau.connect.api import Converter, Header, HeaderConverter
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.data import OPTIONAL_BYTES_SCHEMA, OPTIONAL_STRING_SCHEMA, Schema, SchemaAndValue, Struct
from moldau.connect.errors import DataException

__all__ = ["ByteArrayConverter", "SimpleHeaderConverter", "StringConverter"]

ENCODING_CONFIG = "converter.encoding"


class StringConverter(Converter):
    """Any value as its text (`str()`), encoded in `converter.encoding` (default UTF-8); reads give strings."""

    aliases = ("org.apache.kafka.connect.storage.StringConverter",)

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(ENCODING_CONFIG, ConfigType.STRING, "UTF-8", Importance.HIGH,
                                  "The name of the character encoding of the text.")

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        # Kafka also accepts the key/value-specific spelling (`converter.encoding` under `key.`/`value.`).
        prefix = "key." if is_key else "value."
        encoding = configs.get(prefix + ENCODING_CONFIG, configs.get(ENCODING_CONFIG, "UTF-8"))
        try:
            "".encode(str(encoding))
        except LookupError:
            raise DataException(f"unknown encoding {encoding!r}") from None
        self.encoding = str(encoding)

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Sequence[Header] = ()) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, Struct):
            value = value.to_dict()
        return str(value).encode(self.encoding)

    def to_connect_data(self, topic: str, data: bytes | None, headers: Sequence[Header] = ()) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, None)
        try:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, bytes(data).decode(self.encoding))
        except UnicodeDecodeError as exc:
            raise DataException(f"topic {topic}: data is not {self.encoding} text: {exc}") from None


class ByteArrayConverter(Converter, HeaderConverter):
    """Bytes as they are: the value must be bytes (or None), and reads give the raw bytes. Also a header
    converter, as Kafka's is (MirrorMaker 2 sets it as `header.converter`), passing header values through."""

    aliases = ("org.apache.kafka.connect.converters.ByteArrayConverter",)

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        pass

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, data)

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Sequence[Header] = ()) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataException(f"ByteArrayConverter needs bytes, not {type(value).__name__}")
        return bytes(value)

    def to_connect_data(self, topic: str, data: bytes | None, headers: Sequence[Header] = ()) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, None if data is None else bytes(data))




class SimpleHeaderConverter(HeaderConverter):
    """Header values as UTF-8 text (bytes pass through unchanged); reads give strings, or bytes when the
    header is not valid UTF-8."""

    aliases = ("org.apache.kafka.connect.storage.SimpleHeaderConverter",)

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None or isinstance(value, (bytes, bytearray)):
            return None if value is None else bytes(value)
        if isinstance(value, bool):
            return str(value).lower().encode()
        return str(value).encode("utf-8")

    def to_connect_header(self, topic: str, key: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        try:
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, bytes(data).decode("utf-8"))
        except UnicodeDecodeError:
            return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, bytes(data))
