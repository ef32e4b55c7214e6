"""The words of a directive approval's question (what only the owner decides, asked by
:mod:`zerg.inbound.directives`): how the question Zerg appends to an answer begins, how long it stays
open, and how the text around it is kept honest.

The question itself is a ``directive`` approval of the one approvals table
(:mod:`zerg.approvals.requests`, which holds all of its SQL); :mod:`zerg.inbound.directives` asks it,
writes its words (:func:`zerg.inbound.directives.question_text`) and confirms it on the owner's yes.
Nothing here touches the database.
"""

from __future__ import annotations

from datetime import timedelta

TTL = timedelta(hours=24)  # a question the owner did not answer within a day is no longer asked
QUESTION_START = "[Zerg] Waiting for your yes"  # how the question Zerg appends to an answer begins


def disarm(text: str) -> str:
    """A model's answer with any imitation of the question's opening quoted, so the only question
    in an answer that reads as Zerg's is the one Zerg appends after it."""
    return text.replace(QUESTION_START, "[quoted] Waiting for your yes")


def split_question(answer: str) -> tuple[str, str | None]:
    """(the answer's own text, the question Zerg appended to it or None): whoever shortens an
    answer (an SMS, a mail) shortens the first and keeps the question whole."""
    head, sep, question = answer.rpartition(f"\n\n{QUESTION_START}")
    return (head, f"{QUESTION_START}{question}") if sep else (answer, None)
