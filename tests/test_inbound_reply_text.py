"""The person's own words of an email reply (zerg.inbound.reply_text.strip_quotes), read by structure:
one test per failure kind of issue 26 (A1-A4: the owner's words lost; B1-B7: history leaking) and
per signature convention, on the cases of tests/support/reply_cases.py in a dozen languages; a
property: whatever the person typed above a quote block of any supported shape comes out whole."""

from __future__ import annotations

import textwrap

import pytest

from tests.support.reply_cases import KINDS, MARKS, ZERG, Case, cases
from zerg.inbound.reply_text import strip_quotes


def words(text: str) -> str:
    return " ".join(text.split())


def read(case: Case) -> str:
    return strip_quotes(case.text, quoted_subject=case.subject, marks=case.marks)


def by_name(kind: str):
    return pytest.mark.parametrize("case", cases(kind), ids=lambda c: c.name)


def test_every_kind_has_cases():
    assert {kind: len(cases(kind)) for kind in KINDS if len(cases(kind)) < 2} == {}


# --- A: the owner's words are never lost --------------------------------------------------------

@by_name("A1")
def test_a_reply_line_right_above_an_attribution_or_quote_line_is_kept(case):
    assert read(case) == case.expected


@by_name("A2")
def test_sent_from_my_inside_a_sentence_is_the_persons_text_not_a_footer(case):
    assert read(case) == case.expected


@by_name("A3")
def test_a_framed_line_no_header_block_follows_is_text_not_a_separator(case):
    assert read(case) == case.expected


@by_name("A4")
def test_a_line_starting_with_an_arrow_that_quotes_nothing_is_kept(case):
    assert read(case) == case.expected


# --- B: quoted history never passes for the owner's words ---------------------------------------

@by_name("B1")
def test_an_attribution_wrapped_over_three_lines_or_broken_before_the_address_is_removed(case):
    assert read(case) == case.expected


@by_name("B2")
def test_an_attribution_without_its_final_colon_is_removed_above_a_quote(case):
    assert read(case) == case.expected


@by_name("B3")
def test_the_reply_and_the_attribution_on_one_line_keep_the_reply(case):
    assert read(case) == case.expected


@by_name("B4")
def test_an_attribution_without_on_is_removed(case):
    assert read(case) == case.expected


@by_name("B5")
def test_a_quoted_header_block_in_any_language_ends_the_reply(case):
    assert read(case) == case.expected


@by_name("B6")
def test_a_hard_wrapped_quote_line_that_lost_its_marker_is_dropped_but_an_answer_is_not(case):
    assert read(case) == case.expected


@by_name("B7")
def test_a_phone_footer_ends_the_reply_with_the_unmarked_history_after_it(case):
    assert read(case) == case.expected


# --- signature conventions ------------------------------------------------------------------------

@by_name("footer")
def test_client_footers_in_any_language_are_removed(case):
    assert read(case) == case.expected


@by_name("signoff")
def test_a_sign_off_block_at_the_end_is_removed_but_never_all_the_words(case):
    assert read(case) == case.expected


@by_name("list")
def test_a_mailing_list_footer_after_an_underscore_line_is_removed(case):
    assert read(case) == case.expected


@by_name("rule")
def test_a_stray_rule_line_above_a_header_block_goes_with_it(case):
    assert read(case) == case.expected


@by_name("keep")
def test_owner_words_that_only_look_like_history_are_kept(case):
    assert read(case) == case.expected


@by_name("lang")
def test_attributions_header_blocks_and_footers_of_more_clients_and_languages_are_read(case):
    assert read(case) == case.expected


def test_the_only_words_are_never_taken_for_a_wrapped_quote_line():
    text = (f"On Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n"
            "> Should I make this weekly instead of daily at six\nyes")
    assert strip_quotes(text, marks=MARKS) == "yes"


@pytest.mark.parametrize("text", [
    f"On Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n> Disk 91% full on web-1",  # Gmail
    "On 11/23/26 06:01, Zerg wrote:\n> Disk 91% full on web-1",  # Thunderbird: no address, a quote block
    f"On Monday, November 23, 2026, 06:01:22 AM EST, Zerg <{ZERG}> wrote:\n\n\nDisk 91% full on web-1",  # Yahoo
    "On 11/23/26 06:01, Zerg wrote:\n\nDisk 91% full on web-1",  # no address, unmarked: names the alert
    f"> Reply APPROVE or DENY.\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n> Reply APPROVE or DENY.",
    f"> Disk 91% full on web-1\n\nFrom: Zerg <{ZERG}>\nSent: Monday, November 23, 2026 6:01 AM\nTo: Dana",
    f"Sent from my iPhone\n\n> On 23 Nov 2026, at 06:01, Zerg <{ZERG}> wrote:\n>\n> Disk 91% full on web-1",
])
def test_a_reply_with_nothing_typed_stays_empty(text):
    """When the first reading keeps nothing, a second one takes a ``>`` block at the very top above an
    attribution, or an attribution with no address at the very top, for the person's ("> 200 signed
    up, book the big room", "On March 1, the bank wrote: …"); it never takes Zerg's quoted alert or
    a snippet of the history below for them."""
    assert strip_quotes(text, quoted_subject="Disk 91% full on web-1", marks=MARKS) == ""


def test_a_quote_block_typed_among_the_persons_lines_is_theirs_unless_it_quotes_the_history():
    history = "\n\nOn Mon, Nov 23, 2026 at 6:01 AM Dana <dana@example.com> wrote:\n> Is nginx up?\n"
    typed = "Run this and send me the output:\n\n> sudo systemctl status nginx\n> journalctl -u nginx\n\nThanks"
    assert strip_quotes(typed + history) == typed
    snippet = "Hi,\n\n> Is nginx up?\n\nYes, since 6:05."
    assert strip_quotes(snippet + history) == "Hi,\n\nYes, since 6:05."
    # With no history below to tell them apart, a block with a blank line on both sides is an
    # inline answer's quote; one that touches the person's lines is theirs.
    assert strip_quotes("Hi,\n\n> Is nginx up?\n\nYes, since 6:05.") == "Hi,\n\nYes, since 6:05."
    assert strip_quotes("Try:\n\n>>> import json\n>>> json.dumps(1)\n'1'\n\nOk?") == \
        "Try:\n\n>>> import json\n>>> json.dumps(1)\n'1'\n\nOk?"


# --- the property: what the person typed above any quote block comes out whole -----------------

NAMES = ["Zerg", "Dana Owner", "Operations Monitoring Team", "Jürgen Müller", "Служба мониторинга", "监控服务"]
ADDRESSES = [ZERG, "ops-monitoring-team@example.com", "j.mueller@example.de"]
# One attribution per client and language: {n} name, {a} address; the date is fixed (the shape is what varies).
ATTRIBUTIONS = [
    "On Mon, Nov 23, 2026 at 6:01 AM {n} <{a}> wrote:",  # Gmail, Outlook mobile
    "On 23 Nov 2026, at 06:01, {n} <{a}> wrote:",  # Apple Mail
    "On 11/23/26 06:01, {n} wrote:",  # Thunderbird
    "Am Mo., 23. Nov. 2026 um 06:01 Uhr schrieb {n} <{a}>:",
    "Am 23.11.2026 um 06:01 schrieb {n} <{a}>:",
    "Le lun. 23 nov. 2026 à 06:01, {n} <{a}> a écrit :",
    "El lun, 23 nov 2026 a las 6:01, {n} (<{a}>) escribió:",
    "Il giorno lun 23 nov 2026 alle ore 06:01 {n} <{a}> ha scritto:",
    "Em seg., 23 de nov. de 2026 às 06:01, {n} <{a}> escreveu:",
    "Op ma 23 nov. 2026 om 06:01 schreef {n} <{a}>:",
    "Den mån 23 nov. 2026 kl 06:01 skrev {n} <{a}>:",
    "man. 23. nov. 2026 kl. 06:01 skrev {n} <{a}>:",
    "пн, 23 нояб. 2026 г. в 06:01, {n} <{a}>:",
    "pon., 23 lis 2026 o 06:01 {n} <{a}> napisał(a):",
    "2026年11月23日(月) 6:01 {n} <{a}>:",
    "{n} <{a}> 于2026年11月23日周一 06:01写道：",
    "{n} <{a}> ezt írta (időpont: 2026. nov. 23., H, 6:01):",
    "23.11.2026 06:01, {n} пишет:",
    "Sent from Samsung Mobile {n} <{a}> wrote:",
    "On Mon, Nov 23, 2026 at 6:01 AM, {n} <{a}> wrote",  # no colon
    "2026/11/23 {n} <{a}>",  # old Gmail, no colon
]
HEADERS = {  # from, sent, to, subject
    "en": ("From", "Sent", "To", "Subject"), "en-date": ("From", "Date", "To", "Subject"),
    "fr": ("De :", "Envoyé :", "À :", "Objet :"), "fr-le": ("De :", "Envoyé le :", "À :", "Objet :"),
    "de": ("Von", "Gesendet", "An", "Betreff"), "es": ("De", "Enviado", "Para", "Asunto"),
    "it": ("Da", "Inviato", "A", "Oggetto"), "pt": ("De", "Enviado", "Para", "Assunto"),
    "nl": ("Van", "Verzonden", "Aan", "Onderwerp"), "no": ("Fra", "Sendt", "Til", "Emne"),
    "sv": ("Från", "Skickat", "Till", "Ämne"), "ru": ("От", "Отправлено", "Кому", "Тема"),
    "pl": ("Od", "Wysłano", "Do", "Temat"), "ja": ("差出人", "送信日時", "宛先", "件名"),
    "zh": ("发件人：", "发送时间：", "收件人：", "主题："),
}
ABOVE_HEADERS = ["", "________________________________", "-----", "———", "-----Original Message-----",
                 "-------- Original message --------", "---------- Forwarded message ---------",
                 "Begin forwarded message:", "Début du message réexpédié :"]
FOOTERS = ["Sent from my iPhone", "Envoyé de mon iPhone", "Von meinem iPhone gesendet", "Enviado desde mi iPhone",
           "Inviato da iPhone", "Verzonden met mijn iPhone", "Skickat från min iPhone", "Отправлено с iPhone",
           "Get Outlook for Android<https://aka.ms/ghei36>", "Gesendet von Outlook für Android",
           "Envoyé à partir de Outlook pour iOS", "Get TypeApp for Android", "iPhoneから送信"]
OPENERS = {"On", "Am", "Le", "El", "Il", "Em", "Op", "Den"}
QUOTED = ["Disk 91% full on web-1", "", "/var is at 91% (18.2 of 20 GB); it grew 4% since yesterday.",
          "Scheduled check: disk space", "Run: http://127.0.0.1:8000/api/jarvis/runs/42", "> older quoted line"]
# The person's words: sentences of a few words, some of them the words history is made of.
FIRST = ["On", "Am", "Le", "El", "Il", "Op", "Den", "From", "Date", "To", "Subject", "Yes", "Please", "Regards",
         "Thanks", "Weekly", "Ok", "Monday", "2026", "Hello", "Sure", "Da", "De", "Von", "Objet", "Ja", "Oui"]
WORDS = ["weekly", "please", "the", "disk", "check", "on", "at", "from", "my", "sent", "wrote", "schrieb", "a", "écrit",
         "2026", "12:30", "Monday", "Nov", "23,", "Bob", "<bob@example.com>", "-", "regards", "de", "iPhone", "mailto",
         "make", "it", "quiet", "night", "Zerg", "Date:", "Subject:", "On", "wrote:", "Sent", "—", "____", "::", "für",
         "Outlook", "Android", "pause", "backup", "(<x@example.org>)", "于2026年", "写道", "écrit :", "2011/4/7"]
SPECIAL = [">>> https://example.com/runs/42 <<<", "Sent from my desk, is much easier than my phone.",
           "---- Enter Feedback Below ----", "From: now on, weekly please", "=== Notes ===", "----- Notes -----",
           "Sent from my laptop this time, the phone is dead."]


def _wrapped(line: str, how: str, width: int) -> list[str]:
    if how == "before <" and " <" in line:
        head, _, tail = line.partition(" <")
        return [head, "<" + tail]
    if how == "wrapped":
        lines = textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False)
        if len(lines) <= 3:
            return lines
    return [line]


def test_text_typed_above_any_quote_block_comes_out_whole():
    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as st

    sentence = st.builds(lambda first, rest, end: " ".join([first, *rest]) + end, st.sampled_from(FIRST),
                         st.lists(st.sampled_from(WORDS), min_size=2, max_size=10),
                         st.sampled_from([".", "?", "!", " please", " thanks", " weekly", " Monday"]))
    owner = st.lists(st.one_of(sentence, sentence, sentence, st.sampled_from(SPECIAL), st.just("")), min_size=1,
                     max_size=8).map(lambda lines: "\n".join(lines).strip("\n")).filter(lambda t: t.strip())
    quoted = st.lists(st.sampled_from(QUOTED), min_size=1, max_size=6).map(
        lambda lines: "\n".join(f"> {x}" if x else ">" for x in lines))
    body = st.lists(st.sampled_from([x for x in QUOTED if x] + ["Disque plein.", "Festplatte voll."]), min_size=1,
                    max_size=5).map("\n".join)
    attribution = st.builds(
        lambda template, name, address, how, width, gap, quote: "\n".join(
            _wrapped(template.format(n=name, a=address), how, width)) + gap + quote,
        st.sampled_from(ATTRIBUTIONS), st.sampled_from(NAMES), st.sampled_from(ADDRESSES),
        st.sampled_from(["one line", "before <", "wrapped"]), st.integers(56, 78), st.sampled_from(["\n", "\n\n"]),
        quoted)
    header = st.builds(
        lambda language, above, sender, body, date_first: _header(HEADERS[language], above, sender, body, date_first),
        st.sampled_from(sorted(HEADERS)), st.sampled_from(ABOVE_HEADERS), st.sampled_from(ADDRESSES), body,
        st.booleans())
    footer = st.builds(lambda f, after: f"{f}\n\n{after}", st.sampled_from(FOOTERS),
                       st.one_of(attribution, header, body))
    block = st.one_of(attribution, header, footer, quoted)
    # The reply and the attribution on one line: "Sure thing On Wed, … wrote:" (clients that open with a word).
    same_line = st.builds(lambda template, name, address, quote: f" {template.format(n=name, a=address)}\n{quote}",
                          st.sampled_from([a for a in ATTRIBUTIONS if a.split()[0] in OPENERS]), st.sampled_from(NAMES),
                          st.sampled_from(ADDRESSES), quoted)

    @settings(max_examples=200, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(owner, st.one_of(st.sampled_from(["\n", "\n\n", "\n\n\n"]).flatmap(lambda gap: block.map(gap.__add__)),
                            same_line), st.booleans())
    def check(typed, history, with_marks):
        assume(not (history.startswith(" ") and typed.rsplit("\n", 1)[-1].startswith(">")))  # a quote line, then
        got = strip_quotes(typed + history, marks=MARKS if with_marks else ())
        assert words(got) == words(typed)

    check()


def _header(labels: tuple[str, str, str, str], above: str, sender: str, body: str, date_first: bool) -> str:
    def field(label: str, value: str) -> str:
        return f"{label} {value}" if label.endswith((":", "：")) else f"{label}: {value}"

    fields = [field(labels[0], f"Zerg <{sender}>"), field(labels[1], "Monday, November 23, 2026 6:01 AM"),
              field(labels[2], "Dana Owner <owner@example.com>"), field(labels[3], "[Zerg WARNING] Disk 91% full")]
    if date_first:
        fields[0], fields[1] = fields[1], fields[0]
    return (f"{above}\n" if above else "") + "\n".join(fields) + "\n\n" + body


def test_strip_quotes_never_raises_and_never_invents_a_word():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    pieces = st.sampled_from(["On ", "wrote:", "> ", ">>> ", " <<<", "<a@b.com>", "From: x", "Sent: y", "-- ", "----",
                              "____", "Sent from my iPhone", "Regards,", "\n", "\n\n", "2026", "12:30", ", ", "写道：",
                              "De : ", "Envoyé le : ", ":", "Thanks", "John Doe", "(<a@b.com>)", "[mailto:a@b.com]"])
    text = st.lists(st.one_of(pieces, st.text(max_size=12)), max_size=40).map("".join)

    @settings(max_examples=200, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(text, st.one_of(st.none(), st.text(max_size=30)))
    def check(raw, subject):
        got = strip_quotes(raw, quoted_subject=subject, marks=MARKS)
        lines = raw.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        for line in got.split("\n"):  # every line is one of the text's, or the start of one (a reply before "On …")
            assert not line or any(x.rstrip().startswith(line) for x in lines), (line, raw)

    check()


def test_a_long_reply_of_hostile_lines_is_read_in_one_pass():
    """Every pass is linear in the text: four times the lines, each starting a shape (attribution,
    header, footer, sign-off, lone quote, list footer, a long line without spaces), cost about four
    times as much, never sixteen (the best of 5 runs each, so a busy machine cannot fake it)."""
    import time

    block = ["On Mon, Nov 23, 2026 at 6:01 AM Operations Monitoring Team", "From: now on, weekly please", "",
             "> a quoted line that is long enough to have been wrapped by a client and", "its continuation",
             "Sent from my desk, is much easier than my phone.", "", "", "Sent from a torch", "---- framed ----",
             "Regards,", "x@" * 1000, "__", "> lone", "Date: 10:00", "Zerg wrote:", "", "\n" * 50, "Sent from"]

    def cost(copies: int) -> float:
        text = "\n".join(block * copies)
        assert strip_quotes(text).count("its continuation") == copies  # read to the end
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            strip_quotes(text, quoted_subject="[Zerg WARNING] Disk 91% full on web-1", marks=MARKS)
            best = min(best, time.perf_counter() - started)
        return best

    assert cost(2000) < 8 * cost(500) + 0.05
