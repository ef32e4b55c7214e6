"""Reply text on cases written independently of the extractor (tests/support/reply_cases_independent.py):
each case's text part goes through ``strip_quotes(clean_text(...))`` exactly as zerg.inbound.email
calls it (CRLF made LF first, the reply's subject as ``quoted_subject``, the mail domain as a mark,
and Zerg's sender address too for a reply to an alert), and must come out as the person's words,
compared after whitespace normalisation (any run of whitespace, non-breaking spaces included, is one
space)."""

from __future__ import annotations

import pytest

from tests.support.reply_cases_independent import CASES, DOMAIN, ZERG_SENDER, Case
from zerg.inbound import mail_headers
from zerg.inbound.reply_text import clean_text, strip_quotes


def extract(case: Case) -> str:
    text = case.text.replace("\r\n", "\n").replace("\r", "\n")  # as email._text_of hands a text part on
    marks = (f"@{DOMAIN}", *((ZERG_SENDER,) if case.alert else ()))
    return strip_quotes(clean_text(text), quoted_subject=mail_headers.quoted_subject(case.subject), marks=marks)


def normal(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_persons_words_come_out(case: Case) -> None:
    got = normal(extract(case))
    assert got in {normal(case.expected), *(normal(a) for a in case.accept)}, \
        f"{case.client} ({case.kind}): expected {normal(case.expected)!r}, got {got!r}"


def test_the_cases_cover_what_they_claim() -> None:
    """Enough cases per kind that a rate means something, unique ids, and every expectation is text
    the case actually holds (no expected word invented)."""
    kinds = {c.kind for c in CASES}
    assert {"top", "inline", "footer", "signature", "lookalike", "alert"} <= kinds
    assert 80 <= len(CASES) <= 120
    assert len({c.id for c in CASES}) == len(CASES)
    for case in CASES:
        words = set(normal(case.text.replace(">", " ")).split())
        for option in (case.expected, *case.accept):
            assert set(normal(option.replace(">", " ")).split()) <= words, case.id
