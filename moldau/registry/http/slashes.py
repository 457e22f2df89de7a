"""Subjects that hold a `/`, sent as `%2F`.

confluent-kafka's Protobuf serializer registers each imported file under a subject named after its import path
(`acme/v1/address.proto`), so such subjects are common, and clients send the slash encoded. Starlette routes on
the decoded path, where that slash would split the subject into two segments and match no route.
`EncodedSlashes` re-decodes the raw path segment by segment, keeping a decoded slash inside its segment as
SLASH_MARK; the `subject` path convertor, which every route naming a subject uses (`{subject:subject}`), turns
it back into `/`.

The console's group pages use the same pair for group names, which may hold any character: `{name:segment}` is
the same convertor under a name that does not say "subject".
"""

from __future__ import annotations

from urllib.parse import unquote

from starlette.convertors import Convertor, register_url_convertor
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SLASH_MARK", "EncodedSlashes", "SubjectConvertor"]

SLASH_MARK = "\ue000"  # a private-use character: never part of a real subject name


class EncodedSlashes:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and b"%2f" in raw.lower():
            segments = raw.decode("latin-1").split("/")
            scope = {**scope, "path": "/".join(unquote(s).replace("/", SLASH_MARK) for s in segments)}
        await self.app(scope, receive, send)


class SubjectConvertor(Convertor[str]):
    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return value.replace(SLASH_MARK, "/")

    def to_string(self, value: str) -> str:
        return value.replace("/", SLASH_MARK)


register_url_convertor("subject", SubjectConvertor())
register_url_convertor("segment", SubjectConvertor())
