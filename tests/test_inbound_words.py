"""What a whole short reply means: acknowledgement or confirmation, never a word inside a question."""

from __future__ import annotations

import pytest

from zerg.inbound.words import MAX_CHARS, is_acknowledgement, is_affirmative


@pytest.mark.parametrize("text", ["ok", "OK", "Ack.", "okay!", "got it", "Got it, thanks!", "roger that", "👍", "👍🏽",
                                  "ok👍", "k", "ok ok", "noted, thx"])
def test_an_acknowledgement_as_the_whole_message_is_one(text):
    assert is_acknowledgement(text) and not is_affirmative(text)


@pytest.mark.parametrize("text", ["yes", "Yes.", "y", "yes please", "Yes, do it!", "go ahead", "thanks, yes", "confirm"])
def test_a_yes_as_the_whole_message_is_a_confirmation(text):
    assert is_affirmative(text) and not is_acknowledgement(text)


@pytest.mark.parametrize("text", ["", "   ", "thanks", "thank you", "please", "ok but why is the disk full?",
                                  "yes and also delete the backup check", "no", "not ok", "okay?? what"])
def test_politeness_alone_or_a_sentence_around_the_word_means_nothing(text):
    assert not is_acknowledgement(text) and not is_affirmative(text)


def test_a_long_or_hostile_message_means_nothing_and_costs_linear_time():
    assert not is_acknowledgement("ok " * (MAX_CHARS // 3 + 1))
    assert not is_acknowledgement("k" * 30 + "?x")  # a backtracking regex took seconds on this
    assert not is_acknowledgement("k " * 29 + "x") and is_acknowledgement("k " * 29)
