"""A tiny aligned-table formatter for human-readable command output."""

from collections.abc import Iterable, Sequence

GAP = "  "


def _cell(value: object) -> str:
    """Render one cell; None shows as a dash so empty columns stay visible."""
    return "-" if value is None else str(value)


def _numeric_columns(rows: Sequence[Sequence[object]], width: int) -> list[bool]:
    """Columns holding only integers are right-aligned, as numbers read best that way."""
    return [
        bool(rows) and all(isinstance(row[i], int) and not isinstance(row[i], bool) for row in rows)
        for i in range(width)
    ]


def format_table(
    rows: Iterable[Sequence[object]],
    headers: Sequence[str] | None = None,
    indent: str = "",
) -> str:
    """Lay `rows` out in columns separated by two spaces, with an optional header line.

    Trailing spaces are stripped so the output diffs and greps cleanly.
    """
    body = [list(row) for row in rows]
    width = max([len(headers or ())] + [len(row) for row in body])
    for row in body:
        row.extend([""] * (width - len(row)))
    numeric = _numeric_columns(body, width)
    cells = [[_cell(value) for value in row] for row in body]
    if headers is not None:
        cells.insert(0, list(headers) + [""] * (width - len(headers)))
    sizes = [max((len(line[i]) for line in cells), default=0) for i in range(width)]
    lines = []
    for line in cells:
        parts = [
            text.rjust(size) if is_number else text.ljust(size)
            for text, size, is_number in zip(line, sizes, numeric, strict=True)
        ]
        lines.append((indent + GAP.join(parts)).rstrip())
    return "\n".join(lines)


def format_assignment(partitions: list[tuple[str, int]]) -> str:
    """`t:0,1 u:3`: partitions grouped by topic, or '-' for none."""
    by_topic: dict[str, list[str]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(str(partition))
    return " ".join(f"{topic}:{','.join(parts)}" for topic, parts in by_topic.items()) or "-"
