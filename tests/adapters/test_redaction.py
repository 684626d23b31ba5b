"""The redaction of URL passwords, with every character a password may hold, alone, in free text and in JSON.

A password is legal in a URL without percent-encoding when redis-py reads that very password back
from the URL (`redis.connection.parse_url`); percent-encoded, any printable password is legal.
"""

import json
import logging
import string
from urllib.parse import quote, urlsplit

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from redis.connection import parse_url

from adapters.redaction import RedactingFilter, redact

#: Printable characters: every one a password typed on a keyboard may hold (line breaks and tabs end a URL).
PRINTABLE = st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.characters(
    blacklist_categories=("Cc", "Cs", "Zl", "Zp"), min_codepoint=0xA0)
PASSWORDS = st.text(PRINTABLE, min_size=1, max_size=24)
TEXT = st.text(PRINTABLE | st.sampled_from("\n@:/?#&'\""), max_size=40)
OTHER = "x"


def _url(password: str, encoded: bool, user: str = "", tail: str = "/0") -> str:
    return f"redis://{user}:{quote(password, safe='') if encoded else password}@127.0.0.1:6379{tail}"


def _query_url(password: str, encoded: bool) -> str:
    return f"rediss://127.0.0.1:6379/0?ssl_cert_reqs=required&password={quote(password, safe='') if encoded else password}&db=1"


def _quoted(url: str) -> str:
    """`url` single-quoted for a shell as shlex.quote does, whatever characters it holds."""
    return "'" + url.replace("'", "'\"'\"'") + "'"


def _legal(url: str, password: str) -> bool:
    try:
        return parse_url(url).get("password") == password
    except ValueError:
        return False


@settings(deadline=None)
@given(PASSWORDS, st.booleans(), st.sampled_from(["", "worker", "a.b-c"]), st.sampled_from(["", "/0", "/0?db=1", "#x"]))
@example("p'w@rd", False, "", "/0")
@example("a@b@c:d", False, "coordinator", "")
def test_a_url_alone_keeps_everything_but_its_password(password, encoded, user, tail):
    url = _url(password, encoded, user, tail)
    assume(_legal(url, password))
    assert redact(url) == f"redis://{user}:***@127.0.0.1:6379{tail}"
    parts = urlsplit(redact(url))
    assert (parts.hostname, parts.port, parts.username or "", parts.password) == ("127.0.0.1", 6379, user, "***")


@settings(deadline=None)
@given(PASSWORDS, st.booleans())
@example("p'w@rd&x", False)
def test_a_query_password_is_hidden_and_the_other_parameters_kept(password, encoded):
    url = _query_url(password, encoded)
    assume(_legal(url, password))
    assert redact(url) == "rediss://127.0.0.1:6379/0?ssl_cert_reqs=required&password=***&db=1"


@settings(deadline=None)
@given(PASSWORDS, st.booleans(), st.booleans(), TEXT, TEXT)
@example("pw", False, False, "", " then mail a@b.org")
@example("it's@home", False, False, "connecting to ", " (attempt 2)")
def test_in_free_text_nothing_of_the_password_survives(password, encoded, in_query, before, after):
    """What is left of a text does not depend on the password in it: two passwords leave the same text."""
    assume("password=" not in (before + after).lower())  # the text around holds no secret of its own
    make = _query_url if in_query else _url
    assume(_legal(make(password, encoded), password))
    text, other = before + make(password, encoded) + after, before + make(OTHER, encoded) + after
    assert redact(text) == redact(other)
    assert "***" in redact(text)


@settings(deadline=None)
@given(PASSWORDS, st.booleans(), st.booleans(), st.booleans(), TEXT)
def test_a_json_document_stays_valid_and_only_the_password_goes(password, encoded, in_query, ascii_only, note):
    make = _query_url if in_query else _url
    url = make(password, encoded)
    assume(_legal(url, password))
    assume("://" not in note and "password=" not in note.lower())
    data = {"broker": url, "command": "memfarm run --broker " + _quoted(url), "note": note, "email": "a@b.org",
            "nested": json.dumps({"broker": url})}
    text = json.dumps(data, ensure_ascii=ascii_only, indent=1)
    redacted = json.loads(redact(text))
    assert redacted == json.loads(redact(json.dumps({**data, "broker": make(OTHER, encoded),
                                                      "command": "memfarm run --broker " + _quoted(make(OTHER, encoded)),
                                                      "nested": json.dumps({"broker": make(OTHER, encoded)})},
                                                     ensure_ascii=ascii_only, indent=1)))
    assert (redacted["note"], redacted["email"]) == (note, "a@b.org")
    assert redacted["broker"] == make("***", False) and redacted["command"] == f"memfarm run --broker '{redacted['broker']}'"
    assert json.loads(redacted["nested"]) == {"broker": make("***", False)}


def test_the_passwords_the_issue_names_are_hidden_in_meta_shaped_json():
    for password in ("it's", "p@ss", "a'b@c", 'q"uote\\', "x:y@z"):
        meta = json.dumps({"broker": f"redis://coordinator:{password}@hub:6379/0", "k": [1, 2]})
        assert json.loads(redact(meta)) == {"broker": "redis://coordinator:***@hub:6379/0", "k": [1, 2]}


def test_text_without_a_password_is_left_alone():
    for text in ("redis://127.0.0.1:6379/0", "redis://worker@hub:6379/0 and a@b", "plain a:b@c text",
                 '{"url": "https://example.org/a?b=c", "n": 1}', "memfarm run --broker redis://h:1/0 --output x"):
        assert redact(text) == text


@pytest.mark.parametrize("password", ["it's", "p@ss", "a@b c:d'e"])
def test_the_log_filter_redacts_arguments_and_message(password, caplog):
    logger = logging.getLogger("tests.redaction")
    caplog.handler.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="tests.redaction"):
        logger.info("cannot reach redis at %s: refused", _url(password, False))
        logger.info("broker " + _url(password, False, "worker", ""))
    assert [r.getMessage() for r in caplog.records] == ["cannot reach redis at redis://:***@127.0.0.1:6379/0: refused",
                                                        "broker redis://worker:***@127.0.0.1:6379"]


def test_json_that_escapes_its_slashes_is_redacted_too():
    escaped = r'{"broker": "redis:\/\/:p@ss:w@h\/0", "n": 1}'
    assert json.loads(redact(escaped)) == {"broker": "redis://:***@h/0", "n": 1}
