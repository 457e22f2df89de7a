"""Checks on text that parsers of file names, headers, configs and command lines share."""


def ascii_digits(text: str) -> bool:
    """Whether `text` is one or more of the digits 0-9.

    `str.isdigit` alone also accepts other scripts' digits and signs such as "²", on which `int()` then fails (or
    which it reads as a number nobody wrote in ASCII): a file name or header carrying one would raise where a
    clear refusal belongs.
    """
    return text.isascii() and text.isdigit()
