"""Text safe on a terminal: what a results file, a dataset or Redis holds cannot drive the terminal."""

import pytest

from adapters.terminal import printable, printable_text


@pytest.mark.parametrize("raw, shown", [
    ("a\x1b[2Jb", "a\\x1b[2Jb"),                    # an escape sequence
    ("a\x07", "a\\x07"),                            # the bell that ends a window title
    ("left\u202eright", "left\\u202eright"),        # a right-to-left override
    *[(f"x{chr(c)}", f"x\\u{c:04x}") for c in (*range(0x202a, 0x202f), *range(0x2066, 0x206a))],
    ("one\ntwo", "one\\ntwo"),                      # a line that would fake another
    ("caf\u00e9 \u6f22\u5b57", "caf\u00e9 \u6f22\u5b57"),  # printable text stays as it is
])
def test_printable_escapes_what_would_drive_the_terminal(raw, shown):
    assert printable(raw) == shown


def test_printable_text_keeps_its_own_line_breaks_and_escapes_the_rest():
    assert printable_text("== run\u202e\nsystem \x1b[31mred\r") == "== run\\u202e\nsystem \\x1b[31mred\\r"
