"""Email replies as people and their clients write them, each with the words the person wrote: the
case set of :mod:`zerg.inbound.reply_text` (tests/test_inbound_reply_text.py checks every case,
``bench.reply_text`` times them and counts the exact matches).

Written for Zerg, not taken from any other project's test suite. Each case names its kind (the
failure kinds of issue 26, the signature conventions, and owner words that only look like history)
so a test per kind can pick its own; ``subject`` and ``marks`` are what the email parser passes
(the subject answered, Zerg's addresses).

    for case in cases("A1"):
        assert strip_quotes(case.text, quoted_subject=case.subject, marks=case.marks) == case.expected
"""

from __future__ import annotations

from dataclasses import dataclass

ZERG = "zerg@zerg.localhost"
MARKS = ("@zerg.localhost", ZERG)

KINDS = {
    "A1": "a reply line right above an attribution or quote line",
    "A2": '"Sent from my ..." inside a sentence',
    "A3": "a framed line that is no separator",
    "A4": "an owner's line starting with > that is no quote",
    "B1": "an attribution wrapped over 2-3 lines or broken before <",
    "B2": "an attribution without its final colon",
    "B3": "the reply and the attribution on one line",
    "B4": 'an attribution without "On"',
    "B5": "a quoted header block (Outlook, forwarded, Date: first)",
    "B6": "a hard-wrapped quoted line whose continuation lost its >",
    "B7": "a phone footer followed by unmarked history",
    "footer": "a client's footer",
    "signoff": "a sign-off block at the end",
    "list": "a mailing-list footer after a __ line",
    "rule": "a stray rule line above a header block",
    "keep": "owner words that only look like history",
    "lang": "more clients and languages (written after the code, as a check)",
}


@dataclass(frozen=True)
class Case:
    kind: str
    name: str
    text: str
    expected: str
    subject: str | None = None
    marks: tuple[str, ...] = ()


def _q(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


ALERT_EN = "Disk 91% full on web-1\n\n/var is at 91% (18.2 of 20 GB).\nScheduled check: disk space"
QUOTE = "> Disk 91% full on web-1\n> /var is at 91%."
CASES: tuple[Case, ...] = (
    # --- A1: the line above the attribution is the person's --------------------------------------
    Case("A1", "issue example", "Hello\n> On 22 Aug 2015, at 19:21, Adam <a@b.com> wrote:\n>\n> Hi there!", "Hello"),
    Case("A1", "gmail attribution right under the text",
         f"Yes please, weekly.\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n{_q(ALERT_EN)}",
         "Yes please, weekly.", marks=MARKS),
    Case("A1", "german apple mail",
         f"Passt so.\nAm 23.11.2026 um 06:01 schrieb Zerg <{ZERG}>:\n> Festplatte zu 91 % voll",
         "Passt so."),
    Case("A1", "french quoted attribution",
         f"D'accord pour lundi\n> Le 23 nov. 2026 à 06:01, Zerg <{ZERG}> a écrit :\n>\n> Disque plein",
         "D'accord pour lundi"),
    Case("A1", "a line ending in the name", "Thanks Adam\nAdam <adam@example.com> wrote:\n> hi there", "Thanks Adam"),
    Case("A1", "an owner line that starts like an attribution",
         f"On it\nOn 23 Nov 2026, at 06:01, Zerg <{ZERG}> wrote:\n\n{_q(ALERT_EN)}", "On it"),
    Case("A1", "spanish",
         f"Perfecto, gracias\n> El lun, 23 nov 2026 a las 6:01, Zerg (<{ZERG}>) escribió:\n> Disco lleno",
         "Perfecto, gracias"),
    Case("A1", "two owner lines above a wrapped attribution",
         "Monday works.\nOn Friday I am out.\nOn Mon, Nov 23, 2026 at 6:01 AM Operations\n<ops@example.com> wrote:\n"
         "> x",
         "Monday works.\nOn Friday I am out."),
    # --- A2: "Sent from my" that is a sentence ----------------------------------------------------
    Case("A2", "issue example", "Sent from my desk, is much easier than my phone.",
         "Sent from my desk, is much easier than my phone."),
    Case("A2", "above an attribution",
         f"Sent from my desk, is much easier than my phone.\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n"
         f"{_q(ALERT_EN)}", "Sent from my desk, is much easier than my phone."),
    Case("A2", "in the middle", "I'll do it tonight.\nSent from my laptop this time, the phone is dead.\nDana",
         "I'll do it tonight.\nSent from my laptop this time, the phone is dead.\nDana"),
    Case("A2", "german sentence", "Gesendet von meinem Schreibtisch aus, weil das Handy leer ist.\nBitte wöchentlich.",
         "Gesendet von meinem Schreibtisch aus, weil das Handy leer ist.\nBitte wöchentlich."),
    Case("A2", "french sentence", "Envoyé de mon bureau, c'est plus simple que le téléphone.\nMerci",
         "Envoyé de mon bureau, c'est plus simple que le téléphone.\nMerci"),
    Case("A2", "a question about a footer", "Sent from my iPhone?\nWhy does the alert say that?",
         "Sent from my iPhone?\nWhy does the alert say that?"),
    # --- A3: framed lines that are text ------------------------------------------------------------
    Case("A3", "issue example",
         f"---- Enter Feedback Below ----\nThe check is too noisy.\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> "
         f"wrote:\n{_q(ALERT_EN)}", "---- Enter Feedback Below ----\nThe check is too noisy."),
    Case("A3", "a heading of the owner's", "Here are my notes\n------ Notes ------\nweekly\nquiet at night",
         "Here are my notes\n------ Notes ------\nweekly\nquiet at night"),
    Case("A3", "equals signs", "=== Summary ===\nall good, make it weekly",
         "=== Summary ===\nall good, make it weekly"),
    Case("A3", "rules around text", "-----\nweekly is fine\n-----\nthanks", "-----\nweekly is fine\n-----\nthanks"),
    Case("A3", "underscores then text", "__________\nplease make it weekly", "__________\nplease make it weekly"),
    Case("A3", "german frame", "---- Bitte hier antworten ----\nWöchentlich reicht.",
         "---- Bitte hier antworten ----\nWöchentlich reicht."),
    # --- A4: > that is no quote ---------------------------------------------------------------------
    Case("A4", "issue example", ">>> http://example.com/runs/42 <<<\nThis link is broken.",
         ">>> http://example.com/runs/42 <<<\nThis link is broken."),
    Case("A4", "arrow line between text", "Look at this:\n>>> https://status.example.com <<<\nand tell me",
         "Look at this:\n>>> https://status.example.com <<<\nand tell me"),
    Case("A4", "arrow line above a quote",
         f">> see https://example.com/x <<\nrestart it\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n"
         f"{_q(ALERT_EN)}", ">> see https://example.com/x <<\nrestart it"),
    Case("A4", "a lone > line typed between the owner's lines",
         "Please check:\n> 5 servers are down\nWhat do you think?",
         "Please check:\n> 5 servers are down\nWhat do you think?"),
    Case("A4", "a lone > line above the quoted history",
         f"Please check:\n> 5 servers are down\nWhat do you think?\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> "
         f"wrote:\n{_q(ALERT_EN)}", "Please check:\n> 5 servers are down\nWhat do you think?"),
    Case("A4", "inline answers are still answers to quotes",
         "> Disk 91% full on web-1\nthat's expected\n> Scheduled check: disk space\nmake it weekly",
         "that's expected\nmake it weekly"),
    # --- B1: wrapped attributions --------------------------------------------------------------------
    Case("B1", "gmail broken before <",
         "Weekly is fine.\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg Alerts\n<alerts@example.com> wrote:\n\n> Disk",
         "Weekly is fine."),
    Case("B1", "three lines",
         "Weekly is fine.\n\nOn Mon, Nov 23, 2026 at 6:01 AM Operations Monitoring Team\n"
         "<ops-monitoring-team@example.com>\nwrote:\n\n> Disk 91% full", "Weekly is fine."),
    Case("B1", "german broken before <",
         f"Ja.\n\nAm Mo., 23. Nov. 2026 um 06:01 Uhr schrieb Zerg Überwachung\n<{ZERG}>:\n\n> Platte voll", "Ja.",
         marks=MARKS),
    Case("B1", "french three lines",
         "Oui.\n\nLe lun. 23 nov. 2026 à 06:01, Service de surveillance\n<surveillance@example.fr>\na écrit :\n\n"
         "> Disque plein", "Oui."),
    Case("B1", "spanish verb wrapped", f"Sí.\n\nEl lun, 23 nov 2026 a las 6:01, Zerg (<{ZERG}>)\nescribió:\n\n> Disco",
         "Sí."),
    Case("B1", "italian broken before <",
         "Va bene.\n\nIl giorno lun 23 nov 2026 alle ore 06:01 Servizio Monitoraggio\n<monitor@example.it> ha scritto:"
         "\n\n> Disco pieno", "Va bene."),
    Case("B1", "portuguese", f"Pode ser.\n\nEm seg., 23 de nov. de 2026 às 06:01, Zerg <{ZERG}>\nescreveu:\n\n> Disco",
         "Pode ser."),
    Case("B1", "dutch",
         "Prima.\n\nOp ma 23 nov. 2026 om 06:01 schreef Bewakingsdienst\n<bewaking@example.nl>:\n\n> Schijf",
         "Prima."),
    Case("B1", "swedish",
         "Okej.\n\nDen mån 23 nov. 2026 kl 06:01 skrev Övervakning\n<overvakning@example.se>:\n\n> Disk",
         "Okej."),
    Case("B1", "russian gmail", "Хорошо.\n\nпн, 23 нояб. 2026 г. в 06:01, Служба мониторинга\n<monitor@example.ru>:\n\n"
         "> Диск заполнен", "Хорошо."),
    Case("B1", "polish", f"Dobrze.\n\npon., 23 lis 2026 o 06:01 Zerg <{ZERG}>\nnapisał(a):\n\n> Dysk pełny", "Dobrze."),
    Case("B1", "japanese gmail",
         "了解です。\n\n2026年11月23日(月) 6:01 監視サービス\n<monitor@example.jp>:\n\n> ディスク",
         "了解です。"),
    Case("B1", "chinese gmail",
         "好的。\n\n监控服务 <monitor@example.cn> 于2026年11月23日周一\n06:01写道：\n\n> 磁盘已满",
         "好的。"),
    Case("B1", "unmarked history under a wrapped attribution",
         "Weekly.\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg Alerts\n<alerts@example.com> wrote:\nDisk 91% full on web-1",
         "Weekly."),
    # --- B2: no final colon ------------------------------------------------------------------------
    Case("B2", "wrote without colon",
         "Sounds good.\n\nOn Mon, Nov 23, 2026 at 6:01 AM, John Doe <john@doe.com> wrote\n\n> Disk 91% full",
         "Sounds good."),
    Case("B2", "old gmail date and address", "Sounds good.\n\n2011/4/7 John Doe <john@doe.com>\n\n> Disk 91% full",
         "Sounds good."),
    Case("B2", "german address last", f"Ja, bitte.\n\nAm 23.11.2026 um 06:01 schrieb Zerg <{ZERG}>\n> Platte voll",
         "Ja, bitte."),
    Case("B2", "italian", "Va bene.\n\nIl giorno lun 23 nov 2026 alle ore 06:01 Mario <mario@example.it> ha scritto\n"
         "> Disco pieno", "Va bene."),
    Case("B2", "french thunderbird", "D'accord.\n\nLe 23/11/2026 à 06:01, Zerg a écrit\n> Disque plein", "D'accord."),
    # --- B3: reply and attribution on one line -----------------------------------------------------
    Case("B3", "issue example", f"Sure thing On Wed, Nov 25, 2026 at 9:14 AM Zerg <{ZERG}> wrote:\n> Disk 91% full",
         "Sure thing"),
    Case("B3", "french", f"Pas de souci Le mer. 25 nov. 2026 à 09:14, Zerg <{ZERG}> a écrit :\n> Disque plein",
         "Pas de souci"),
    Case("B3", "german", f"Gerne Am Mi., 25. Nov. 2026 um 09:14 Uhr schrieb Zerg <{ZERG}>:\n> Platte voll", "Gerne"),
    Case("B3", "wrapped too", "Sure thing On Wed, Nov 25, 2026 at 9:14 AM Zerg Alerts\n<alerts@example.com> wrote:\n\n"
         "> Disk 91% full", "Sure thing"),
    Case("B3", "dutch", "Prima Op wo 25 nov. 2026 om 09:14 schreef Bewaking <bewaking@example.nl>:\n> Schijf vol",
         "Prima"),
    # --- B4: no "On" ---------------------------------------------------------------------------------
    Case("B4", "samsung footer and attribution on one line",
         "Ok.\n\nSent from Samsung Mobile John Doe <john@doe.com> wrote:\n\n> Disk 91% full", "Ok."),
    Case("B4", "name and address", "Ok.\n\nJohn Doe <john@doe.com> wrote:\n\n> Disk 91% full", "Ok."),
    Case("B4", "hungarian", f"Rendben.\n\nZerg <{ZERG}> ezt írta (időpont: 2026. nov. 23., H, 6:01):\n\n> Lemez",
         "Rendben."),
    Case("B4", "russian thunderbird", "Хорошо.\n\n23.11.2026 06:01, Zerg пишет:\n> Диск заполнен", "Хорошо."),
    Case("B4", "german web mail", f"Ok.\n\nZerg <{ZERG}> schrieb am 23.11.2026 um 06:01:\n> Platte voll", "Ok."),
    Case("B4", "turkish", f"Tamam.\n\nZerg <{ZERG}>, 23 Kas 2026 Pzt, 06:01 tarihinde şunu yazdı:\n\n> Disk dolu",
         "Tamam."),
    Case("B4", "name wrote", "Ok, weekly.\n\nZerg wrote:\n> Disk 91% full", "Ok, weekly."),
    Case("B4", "chinese apple mail", f"好的\n\n在 2026年11月23日，06:01，Zerg <{ZERG}> 写道：\n\n> 磁盘已满", "好的"),
    Case("B4", "japanese apple mail", f"了解\n\n2026/11/23 6:01、Zerg <{ZERG}>のメール:\n\n> ディスク", "了解"),
    # --- B5: header blocks ---------------------------------------------------------------------------
    Case("B5", "french outlook",
         f"Ça me va.\n\nDe : Zerg <{ZERG}>\nEnvoyé : lundi 23 novembre 2026 06:01\nÀ : Dana <dana@example.com>\n"
         "Objet : Disque plein\n\nLe disque est plein.", "Ça me va."),
    Case("B5", "french outlook envoye le",
         "Ça me va.\n\nDe : Service <service@example.fr>\nEnvoyé le : lundi 23 novembre 2026 06:01\nÀ : Dana\n"
         "Objet : RE: Disque\n\nLe disque est plein.", "Ça me va."),
    Case("B5", "date first",
         f"Fine by me.\n\nDate: Mon, 23 Nov 2026 06:01:00 +0000\nFrom: Zerg <{ZERG}>\nTo: dana@example.com\n"
         "Subject: Disk\n\nDisk 91% full", "Fine by me."),
    Case("B5", "spanish outlook",
         "Vale.\n\nDe: Monitor <monitor@example.es>\nEnviado: lunes, 23 de noviembre de 2026 6:01\nPara: Dana\n"
         "Asunto: Disco\n\nDisco lleno", "Vale."),
    Case("B5", "italian outlook",
         "Va bene.\n\nDa: Monitor <monitor@example.it>\nInviato: lunedì 23 novembre 2026 06:01\nA: Dana\n"
         "Oggetto: Disco\n\nDisco pieno", "Va bene."),
    Case("B5", "portuguese outlook",
         "Certo.\n\nDe: Monitor <monitor@example.pt>\nEnviado: segunda-feira, 23 de novembro de 2026 06:01\n"
         "Para: Dana\nAssunto: Disco\n\nDisco cheio", "Certo."),
    Case("B5", "dutch outlook",
         "Prima.\n\nVan: Monitor <monitor@example.nl>\nVerzonden: maandag 23 november 2026 06:01\nAan: Dana\n"
         "Onderwerp: Schijf\n\nSchijf vol", "Prima."),
    Case("B5", "norwegian outlook",
         "Greit.\n\nFra: Monitor <monitor@example.no>\nSendt: mandag 23. november 2026 06:01\nTil: Dana\nEmne: Disk\n\n"
         "Disken er full", "Greit."),
    Case("B5", "swedish outlook",
         "Okej.\n\nFrån: Monitor <monitor@example.se>\nSkickat: den 23 november 2026 06:01\nTill: Dana\nÄmne: Disk\n\n"
         "Disken är full", "Okej."),
    Case("B5", "russian outlook",
         "Хорошо.\n\nОт: Monitor <monitor@example.ru>\nОтправлено: 23 ноября 2026 г. 6:01\nКому: Dana\nТема: Диск\n\n"
         "Диск заполнен", "Хорошо."),
    Case("B5", "polish outlook",
         "Dobrze.\n\nOd: Monitor <monitor@example.pl>\nWysłano: poniedziałek, 23 listopada 2026 06:01\nDo: Dana\n"
         "Temat: Dysk\n\nDysk pełny", "Dobrze."),
    Case("B5", "japanese outlook",
         "了解です。\n\n差出人: Monitor <monitor@example.jp>\n送信日時: 2026年11月23日 6:01\n"
         "宛先: Dana\n件名: ディスク\n\n"
         "ディスクがいっぱいです", "了解です。"),
    Case("B5", "chinese outlook full-width colons",
         "好的\n\n发件人： Monitor <monitor@example.cn>\n发送时间： 2026年11月23日 6:01\n"
         "收件人： Dana\n主题： 磁盘\n\n磁盘已满",
         "好的"),
    Case("B5", "german date first",
         "Passt.\n\nDatum: 23.11.2026 06:01\nVon: Monitor <monitor@example.de>\nAn: Dana\nBetreff: Platte\n\n"
         "Platte voll",
         "Passt."),
    Case("B5", "thunderbird forward, subject first",
         f"FYI\n\n-------- Forwarded Message --------\nSubject: Disk\nDate: Mon, 23 Nov 2026 06:01:00 +0000\n"
         f"From: Zerg <{ZERG}>\nTo: Dana\n\nDisk 91% full", "FYI"),
    Case("B5", "apple forward",
         f"See below.\n\nBegin forwarded message:\n\nFrom: Zerg <{ZERG}>\nSubject: Disk\n"
         "Date: 23 November 2026 at 06:01:00 GMT\nTo: Dana\n\nDisk 91% full", "See below."),
    Case("B5", "french apple forward",
         "Voir ci-dessous.\n\nDébut du message réexpédié :\n\nDe: Monitor <monitor@example.fr>\nObjet: Disque\n"
         "Date: 23 novembre 2026 à 06:01:00 UTC\nÀ: Dana\n\nDisque plein", "Voir ci-dessous."),
    Case("B5", "bold labels without an address",
         "Noted.\n\n*From:* Monitoring\n*Sent:* Monday, November 23, 2026 6:01 AM\n*To:* Dana\n*Subject:* Disk\n\n"
         "Disk 91% full", "Noted."),
    # --- B6: hard-wrapped quote lines --------------------------------------------------------------
    Case("B6", "continuation between quote lines",
         f"Yes, make it weekly.\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n"
         "> /var is at 91% (18.2 of 20 GB); it grew 4% since yesterday and the\n"
         "logs under /var/log/app are the largest.\n"
         "> Scheduled check: disk space", "Yes, make it weekly."),
    Case("B6", "continuation at the end",
         f"Yes, make it weekly.\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n"
         "> /var is at 91% (18.2 of 20 GB); it grew 4% since yesterday and the\n"
         "logs under /var/log/app are the largest.",
         "Yes, make it weekly."),
    Case("B6", "german continuation",
         f"Ja, wöchentlich.\n\nAm 23.11.2026 um 06:01 schrieb Zerg <{ZERG}>:\n"
         "> Die Festplatte /var ist zu 91 % voll; sie ist seit gestern um 4 % gewachsen und\n"
         "die Logs sind am größten.\n"
         "> Geplante Prüfung: Festplatte", "Ja, wöchentlich."),
    Case("B6", "two continuation lines",
         f"ok\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n"
         "> The check ran on every host of the fleet and found that three of them are\n"
         "running out of space on the data volume, while the others are fine and\n"
         "have at least half of their space left.\n> Run: http://x/runs/42", "ok"),
    Case("B6", "an answer under a finished sentence stays",
         f"On Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n> Should I make this check weekly instead of daily?\n"
         "yes\n> Run: http://x/runs/42", "yes"),
    Case("B6", "a bottom-posted answer is never dropped",
         f"On Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n"
         "> Should I make this check weekly instead of daily at six in the\nyes please", "yes please"),
    # --- B7: footer, then history without marks ------------------------------------------------------
    Case("B7", "iphone", "Yes.\n\nSent from my iPhone\n\nDisk 91% full on web-1\n/var is at 91%.", "Yes."),
    Case("B7", "french iphone", "Oui.\n\nEnvoyé de mon iPhone\n\nAlerte : disque plein\nLe disque /var est à 91 %.",
         "Oui."),
    Case("B7", "german iphone", "Ja.\n\nVon meinem iPhone gesendet\n\nFestplatte voll\n/var ist zu 91 % voll.", "Ja."),
    Case("B7", "samsung then original message",
         f"Ok\n\nSent from Samsung Mobile\n\n-------- Original message --------\nFrom: Zerg <{ZERG}>\n"
         "Date: 23/11/2026 06:01 (GMT+00:00)\nTo: Dana\nSubject: Disk\n\nDisk 91% full", "Ok"),
    Case("B7", "spanish android", "Vale\n\nEnviado desde mi Android\n\nDisco lleno en web-1", "Vale"),
    Case("B7", "a footer first keeps what follows", "Sent from my iPhone\nplease make it weekly",
         "please make it weekly"),
    # --- signature conventions: footers --------------------------------------------------------------
    Case("footer", "typeapp", "Sounds good.\n\nGet TypeApp for Android", "Sounds good."),
    Case("footer", "sent from typeapp", "Sounds good.\n\nSent from TypeApp", "Sounds good."),
    Case("footer", "german outlook for android", "Ok\n\nGesendet von Outlook für Android", "Ok"),
    Case("footer", "french outlook for ios", "Ok\n\nEnvoyé à partir de Outlook pour iOS", "Ok"),
    Case("footer", "outlook with its link", "Ok\n\nGet Outlook for Android<https://aka.ms/ghei36>", "Ok"),
    Case("footer", "yahoo", "Ok\n\nSent from Yahoo Mail on Android", "Ok"),
    Case("footer", "carrier with a comma", "Ok\n\nSent from my Verizon, Samsung Galaxy smartphone", "Ok"),
    Case("footer", "italian", "Va bene\n\nInviato da iPhone", "Va bene"),
    Case("footer", "dutch", "Prima\n\nVerzonden vanaf mijn iPhone", "Prima"),
    Case("footer", "swedish", "Okej\n\nSkickat från min iPhone", "Okej"),
    Case("footer", "norwegian", "Greit\n\nSendt fra min iPhone", "Greit"),
    Case("footer", "russian", "Хорошо\n\nОтправлено с iPhone", "Хорошо"),
    Case("footer", "polish", "Dobrze\n\nWysłane z iPhone'a", "Dobrze"),
    Case("footer", "japanese", "了解\n\niPhoneから送信", "了解"),
    Case("footer", "chinese", "好的\n\n发自我的iPhone", "好的"),
    Case("footer", "portuguese", "Certo\n\nEnviado do meu iPhone", "Certo"),
    # --- sign-off blocks -----------------------------------------------------------------------------
    Case("signoff", "regards name title phone",
         "Please pause the backup check.\n\nRegards,\nJohn Doe\nCEO, Example Inc.\n+1 555 0100",
         "Please pause the backup check."),
    Case("signoff", "german", "Bitte pausieren.\n\nMit freundlichen Grüßen\nJürgen Müller\nLeiter IT",
         "Bitte pausieren."),
    Case("signoff", "french", "Merci de mettre en pause.\n\nCordialement,\nMarie Dupont", "Merci de mettre en pause."),
    Case("signoff", "spanish", "Pausa la comprobación.\n\nSaludos,\nAna García\nOperaciones", "Pausa la comprobación."),
    Case("signoff", "above the quote",
         f"Make it weekly.\n\nBest regards,\nDana Owner\nHead of Ops\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> "
         f"wrote:\n{_q(ALERT_EN)}", "Make it weekly."),
    Case("signoff", "a one-line sign-off with the name stays", "Make this weekly instead of daily.\n\nThanks, Dana",
         "Make this weekly instead of daily.\n\nThanks, Dana"),
    Case("signoff", "words after the sign-off stay", "Can you check?\nThanks\nit is urgent, the site is down",
         "Can you check?\nThanks\nit is urgent, the site is down"),
    Case("signoff", "a sign-off alone is never all dropped", "Regards,\nJohn Doe", "Regards,\nJohn Doe"),
    # --- mailing-list footers ------------------------------------------------------------------------
    Case("list", "two underscores",
         "Weekly is fine.\n\n__\nYou are receiving this because you are subscribed to ops-alerts.\n"
         "Unsubscribe: https://lists.example.com/unsubscribe", "Weekly is fine."),
    Case("list", "mailman",
         "Weekly is fine.\n_______________________________________________\nops mailing list\nops@lists.example.org\n"
         "https://lists.example.org/mailman/listinfo/ops", "Weekly is fine."),
    # --- a stray rule above a header block -----------------------------------------------------------
    Case("rule", "dashes",
         f"Ok.\n\n-----\nFrom: Zerg <{ZERG}>\nSent: Monday, November 23, 2026 6:01 AM\nTo: Dana\nSubject: Disk\n\nDisk",
         "Ok."),
    Case("rule", "em dashes, german",
         "Ok.\n\n———\nVon: Monitor <monitor@example.de>\nGesendet: Montag, 23. November 2026 06:01\nAn: Dana\n"
         "Betreff: Platte\n\nPlatte voll", "Ok."),
    Case("rule", "underscores, french",
         "Ok.\n\n________________________________\nDe : Monitor <monitor@example.fr>\nEnvoyé : lundi 23 novembre 2026\n"
         "À : Dana\nObjet : Disque\n\nDisque plein", "Ok."),
    # --- owner words that only look like history ----------------------------------------------------
    Case("keep", "from as a word", "From: now on, weekly please\nthanks", "From: now on, weekly please\nthanks"),
    Case("keep", "a date in a sentence", "On Monday please run it at 10:00.\nOn 24 Nov 2026 we deploy.",
         "On Monday please run it at 10:00.\nOn 24 Nov 2026 we deploy."),
    Case("keep", "an email the owner drafts", "Please send this:\nTo: bob@example.com\nSubject: weekly report\n"
         "Body: the disk is fine", "Please send this:\nTo: bob@example.com\nSubject: weekly report\n"
         "Body: the disk is fine"),
    Case("keep", "a log line with a date and an address", "Deploy log:\n2026/11/23 Bob <bob@example.com>\n"
         "rolled back the release", "Deploy log:\n2026/11/23 Bob <bob@example.com>\nrolled back the release"),
    Case("keep", "someone wrote, in a sentence",
         "Let's talk on Monday, as Bob wrote:\n> we should wait", "Let's talk on Monday, as Bob wrote:"),
    Case("keep", "an address and a time before a list",
         "Can you forward it to ops <ops@example.com> at 9:00:\nthe disk report\nthe backup report",
         "Can you forward it to ops <ops@example.com> at 9:00:\nthe disk report\nthe backup report"),
    Case("keep", "a bottom-posted answer",
         f"On Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n{_q(ALERT_EN)}\n\n"
         "that's expected, logs rotate tonight",
         "that's expected, logs rotate tonight"),
    Case("keep", "regards in a sentence", "Regards to the team, and make it weekly.",
         "Regards to the team, and make it weekly."),
    Case("keep", "a rule in the owner's text", "first\n----------\nsecond", "first\n----------\nsecond"),
    # --- more clients and languages, written after the code as a check of it --------------------
    Case("lang", "norwegian gmail",
         f"Takk!\n\ntir. 29. apr. 2014 kl. 16:21 skrev Ola Nordmann <ola@example.no>:\n\n{QUOTE}",
         "Takk!"),
    Case("lang", "korean gmail",
         f"감사합니다\n\n2014년 4월 29일 (화) 오후 4:21, Kim <kim@example.kr>님이 작성:\n\n{QUOTE}",
         "감사합니다"),
    Case("lang", "finnish gmail",
         f"Kiitos!\n\nti 29. huhtik. 2014 klo 16.21 Matti <matti@example.fi> kirjoitti:\n\n{QUOTE}",
         "Kiitos!"),
    Case("lang", "czech gmail",
         f"Díky\n\nút 29. 4. 2014 v 16:21 odesílatel Jan <jan@example.cz> napsal:\n\n{QUOTE}", "Díky"),
    Case("lang", "greek gmail",
         f"Ευχαριστώ\n\nΣτις Τρί 29 Απρ 2014 στις 4:21 μ.μ., ο/η Νίκος <nikos@example.gr> έγραψε:\n\n{QUOTE}",
         "Ευχαριστώ"),
    Case("lang", "ukrainian gmail", f"Дякую\n\nвт, 29 квіт. 2014 о 16:21 Олена <olena@example.ua> пише:\n\n{QUOTE}",
         "Дякую"),
    Case("lang", "dutch apple mail",
         f"Bedankt\n\nOp 17-feb.-2015, om 13:18 heeft Bob <bob@example.com> het volgende geschreven:\n\n{QUOTE}",
         "Bedankt"),
    Case("lang", "vietnamese gmail",
         f"Cảm ơn\n\nVào Th 2, 16 thg 12, 2019 vào lúc 12:00 John Doe <john@doe.com> đã viết:\n\n{QUOTE}", "Cảm ơn"),
    Case("lang", "outlook converted address",
         f"Yes\n\nOn Thu, Jul 16, 2015 at 12:34 PM, Bob <bob@example.com<mailto:bob@example.com>> wrote:\n\n{QUOTE}",
         "Yes"),
    Case("lang", "old gmail with a colon",
         f"Yes\n\n2014-10-17 11:28 GMT+03:00 Bob <bob@example.com>:\n\n{QUOTE}", "Yes"),
    Case("lang", "thunderbird", f"Yes\n\nOn 04/19/2011 07:10 AM, Roman Tkachenko wrote:\n\n{QUOTE}", "Yes"),
    Case("lang", "a name with a comma",
         f"Ok\n\nOn Mon, Nov 23, 2026 at 6:01 AM, Doe, John <john@doe.com> wrote:\n\n{QUOTE}", "Ok"),
    Case("lang", "yahoo, unmarked history",
         "Ok\n\nOn Tuesday, April 29, 2014 4:21 PM, Bob <bob@example.com> wrote:\n\n\nthe quoted text", "Ok"),
    Case("lang", "german thunderbird", "Ok\n\nAm 17.02.2015 um 13:18 schrieb Bob:\n> body", "Ok"),
    Case("lang", "polish thunderbird", "Ok\n\nW dniu 29.04.2014 16:21, Bob pisze:\n> body", "Ok"),
    Case("lang", "czech thunderbird",
         "Ok\n\nDne po 16. 12. 2019 12:00 uživatel John Doe <john@doe.com> napsal:\n> body",
         "Ok"),
    Case("lang", "slovak", "Ok\n\nDňa 16. 12. 2019 o 12:00 John Doe <john@doe.com> napísal(a):\n> body", "Ok"),
    Case("lang", "finnish name first", "Ok\n\nJohn Doe <john@doe.com> kirjoitti 16.12.2019 kello 12.00:\n> body", "Ok"),
    Case("lang", "french apple mail, unmarked history",
         "Ok\n\nLe 16 déc. 2019 à 12:00, John Doe <john@doe.com> a écrit :\n\nthe quoted text", "Ok"),
    Case("lang", "an iso date", "Please do.\n\nOn 2026-11-23 06:01, Zerg wrote:\n> body", "Please do."),
    Case("lang", "nested quotes", f"Fine.\n\n\n\nOn Mon, Nov 23, 2026 at 6:01 AM Zerg <{ZERG}> wrote:\n\n>\n> body\n>\n"
         ">> older\n", "Fine."),
    Case("lang", "a custom sent-from line above the quote",
         "I get proper rendering as well.\n\nSent from a magnificent torch of pixels\n\nOn Dec 16, 2011, at 12:47 PM, "
         "Corey Donohoe\n<reply@example.com>\nwrote:\n\n> Was this caching related?",
         "I get proper rendering as well."),
    Case("lang", "mailman footer",
         "What is the best way to clear a bucket?\n\n-Abhishek\n\n\n_______________________________________________\n"
         "users mailing list\nusers@lists.example.com\nhttp://lists.example.com/mailman/listinfo/users\n",
         "What is the best way to clear a bucket?\n\n-Abhishek"),
    Case("lang", "outlook mailto",
         "Yes\n\nFrom: Bob [mailto:bob@example.com]\nSent: Tuesday, April 29, 2014 4:21 PM\nTo: Alice\n"
         "Subject: Disk\n\nbody", "Yes"),
    Case("lang", "windows live mail",
         "Yes\n\n----- Original Message -----\nFrom: Bob\nTo: Alice\nSent: Tuesday, April 29, 2014 4:21 PM\n"
         "Subject: Disk\n\nbody", "Yes"),
    Case("lang", "yahoo indented block",
         "Yes\n\n________________________________\n From: Bob <bob@example.com>\n To: Alice\n"
         " Sent: Tuesday, April 29, 2014 4:21 PM\n Subject: Disk\n\nbody", "Yes"),
    Case("lang", "outlook block on one line",
         "Yes\n\nFrom: Bob <bob@example.com> Sent: Tuesday, April 29, 2014 4:21 PM To: Alice Subject: Disk\n\nbody",
         "Yes"),
    Case("lang", "outlook mac", "Yes\n\nFrom: Bob <bob@example.com>\nDate: Tuesday, April 29, 2014 at 4:21 PM\n"
         "To: Alice\nSubject: Disk\n\nbody", "Yes"),
    Case("lang", "ukrainian outlook", "Так\n\nВід: Bob <bob@example.com>\nНадіслано: 29 квітня 2014 р. 16:21\n"
         "Кому: Alice\nТема: Disk\n\nbody", "Так"),
    Case("lang", "romanian outlook", "Da\n\nDe la: Bob <bob@example.com>\nTrimis: marți, 29 aprilie 2014 16:21\n"
         "Către: Alice\nSubiect: Disk\n\nbody", "Da"),
    Case("lang", "outlook for android",
         "Ok\n\nGet Outlook for Android<https://aka.ms/ghei36>\n________________________________\n"
         "From: Bob <bob@example.com>\nSent: Tuesday, April 29, 2014 4:21:00 PM\nTo: Alice\nSubject: Disk\n\nbody",
         "Ok"),
    Case("lang", "samsung", "Ok\n\nSent from my Samsung Galaxy smartphone.\n\n-------- Original message --------\n"
         "From: Bob <bob@example.com>\nDate: 4/29/14 16:21 (GMT-05:00)\nTo: Alice\nSubject: Disk\n\nbody", "Ok"),
    Case("lang", "finnish footer", "Ok\n\nLähetetty iPhonesta", "Ok"),
    Case("lang", "turkish footer", "Ok\n\niPhone'umdan gönderildi", "Ok"),
    Case("lang", "korean footer", "Ok\n\n나의 iPhone에서 보냄", "Ok"),
    Case("lang", "carrier footer", "Ok\n\nSent via the Samsung Galaxy S7, an AT&T 4G LTE smartphone", "Ok"),
    Case("lang", "protonmail footer", "Ok\n\nSent with ProtonMail Secure Email.", "Ok"),
    Case("lang", "signature", "Ok\n\nbody\n\n-- \nJohn", "Ok\n\nbody"),
    Case("lang", "best and a name", "Thanks, I'll check.\n\nBest,\nJohn", "Thanks, I'll check."),
    Case("lang", "a blank line before the name", "Yes, pause it.\n\nThanks,\n\nJohn Doe", "Yes, pause it."),
    Case("lang", "original message", "Yes\n\n-----Original Message-----\nFrom: x\n", "Yes"),
    Case("lang", "gmail wrapped right under the text",
         "Yes\nOn Mon, Nov 23, 2026 at 6:01 AM Bob Smith <bob@example.com>\nwrote:\n> body", "Yes"),
    Case("lang", "gmail forward", "Ok. Here it is:\n\n---------- Forwarded message ---------\n"
         "From: Bob <bob@example.com>\nDate: Tue, Apr 29, 2014 at 4:21 PM\nSubject: x\nTo: Alice\n\nbody",
         "Ok. Here it is:"),
    Case("lang", "inline answers", "> quoted first\n\nmy answer\n\n> second\n\nanother answer",
         "my answer\n\nanother answer"),
    Case("lang", "a quote at the end is a quote", "Please check the job.\n\n> 5 servers are down",
         "Please check the job."),
    Case("lang", "date first, subject before from",
         "Looks good\n\nDate: Tue, 29 Apr 2014 16:21:00 +0000\nFrom: Bob <bob@example.com>\nSubject: x\n\nbody",
         "Looks good"),
)


def cases(kind: str | None = None) -> list[Case]:
    """The cases of ``kind`` (all when None)."""
    return [c for c in CASES if kind is None or c.kind == kind]
