"""The controller a Metadata answer names must be among the brokers it lists: clients send admin requests only to
a controller they can find there, and wait for it otherwise."""

from moldau.protocol.metadata_response import MetadataBroker
from moldau.server.handlers.metadata import _controller_id


def _listed(*ids: int) -> list[MetadataBroker]:
    return [MetadataBroker(node_id, "127.0.0.1", 9000 + node_id, None) for node_id in ids]


def test_a_listed_broker_names_itself() -> None:
    assert _controller_id(2, _listed(2, 3)) == 2


def test_an_unlisted_broker_names_a_listed_one() -> None:
    assert _controller_id(2, _listed(3, 4)) == 3


def test_no_broker_listed_names_none() -> None:
    assert _controller_id(2, []) == -1
