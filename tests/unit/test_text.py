from moldau.text import ascii_digits


def test_ascii_digits_accepts_only_the_digits_0_to_9() -> None:
    assert ascii_digits("0") and ascii_digits("00000000000000000042")
    for text in ("", "-1", "1.0", " 1", "\u00b2", "1\u00b2", "\u0661\u0662", "\uff11"):
        assert not ascii_digits(text), text
