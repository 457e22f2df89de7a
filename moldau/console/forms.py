"""Reading the console's HTML forms: urlencoded bodies (what every console form sends), bounded in size while
they are read, since anyone who reaches the listener can post (to /login, at least).

Starlette's own form parser would need python-multipart for multipart bodies, which no console form sends; the
standard library's parse_qs reads urlencoded ones.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request

from moldau.console.errors import ConsoleError

__all__ = ["MAX_FORM_BYTES", "form_fields", "name_value_lines"]

MAX_FORM_BYTES = 64 * 1024
URLENCODED = "application/x-www-form-urlencoded"


async def form_fields(request: Request) -> dict[str, str]:
    """The form's fields (the last value of a repeated one). ConsoleError 415 for another content type, 413 for a
    body over MAX_FORM_BYTES, which stops reading there rather than holding whatever a client sends."""
    if not request.headers.get("content-type", "").startswith(URLENCODED):
        raise ConsoleError(415, f"send the form as {URLENCODED}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ConsoleError(413, f"the form is larger than {MAX_FORM_BYTES} bytes")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[-1] for name, values in fields.items()}


def name_value_lines(text: str, what: str, shape: str = "key=value", comments: bool = False) -> list[tuple[str, str]]:
    """`name=value` lines of a text field, the name stripped and the value as typed (it may hold `=` and spaces);
    blank lines, and with `comments` lines starting with `#`, are skipped. ConsoleError 400 names any other line."""
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or (comments and line.strip().startswith("#")):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise ConsoleError(400, f"{what}, line {number}: expected {shape}, got {line.strip()!r}.")
        pairs.append((name.strip(), value))
    return pairs
