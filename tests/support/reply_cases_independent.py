"""Reply cases written independently of the extractor (issue 26, part B): how mainstream clients
lay out a reply's text part, and the words the person typed.

Written from knowledge of the clients' output (Gmail web/Android/iOS in 15 languages, Apple Mail
macOS/iOS, Outlook desktop/web/Mac/iOS/Android, the "Original Message" family, Thunderbird, Yahoo,
Proton Mail, Fastmail, Samsung Email, Spark, Superhuman, K-9, BlackBerry, Zimbra, GMX, Mail.ru,
Yandex, Roundcube, Horde, mutt, mailing-list digests), before the extractor or its own cases were
read, so that nothing here is shaped by the code it measures. No case is taken from another
project's test suite.

Conventions (what a user would want; the ambiguous ones say so in ``note``):
- The expected text is the person's own words: quoted history, its attribution or header block,
  a phone/app footer ("Sent from my iPhone", "Get Outlook for iOS") and a signature under an
  RFC 3676 ``-- `` delimiter are not. A sign-off and a name ("Thanks,\\nTom") were written as the
  person's; after the first run they also accept the reply without them (:data:`SIGNOFF`).
- Interleaved (inline) answers: ``expected`` is the person's lines alone; ``accept`` also takes
  them with the quoted lines they answer (the attribution and the unanswered tail dropped), which
  an agent may well prefer (ambiguous: the person's words out of context, or with it).
- Text is the text/plain part as ``zerg.inbound.email`` hands it on (CRLF made LF there); a few
  keep CRLF, non-breaking or narrow no-break spaces as clients write them.
"""

from __future__ import annotations

from dataclasses import dataclass

DOMAIN = "in.zerg.test"  # the reply domain: email.py always passes "@{mail_domain}" as a mark
ZERG_SENDER = "zerg@example.com"  # ZERG_SENDER_EMAIL, passed as a mark for replies to a Zerg alert
NBSP = "\u00a0"
NNBSP = "\u202f"  # Gmail writes it before AM/PM since 2023
# Ambiguous, decided after the first run: the extractor drops a sign-off block that ends a reply
# ("Regards," then a name, title, phone) when other words of the person's stay above it, as the
# issue's held-back cases count a kept one as a signature left. It says nothing the person asked
# for and nothing else goes with it ("Cheers, Tom" then "P.S. tag v2.3 first" is kept whole), so
# both readings are right for a user.
SIGNOFF = "ambiguous: a closing sign-off block with the name under it may go or stay"


@dataclass(frozen=True)
class Case:
    id: str
    client: str
    kind: str  # top | inline | footer | signature | lookalike | alert
    text: str
    expected: str
    subject: str | None = None  # the reply's Subject header (quoted_subject is derived from it)
    alert: bool = False  # a reply to a Zerg alert: ZERG_SENDER is a mark too
    accept: tuple[str, ...] = ()  # other outputs a user would take as right (ambiguous cases)
    note: str = ""


def L(*lines: str, eol: str = "\n") -> str:
    return eol.join(lines)


CASES: list[Case] = [
    # --- Gmail web / Android / iOS ---------------------------------------------------------------
    Case("gmail-en", "Gmail web", "top", L(
        "Sounds good, Thursday at 10 works for me.", "",
        "On Mon, Mar 4, 2024 at 9:15 AM John Smith <john.smith@example.com> wrote:", "",
        "> Are we still on for Thursday?", ">", "> John", ""),
        "Sounds good, Thursday at 10 works for me."),
    Case("gmail-en-nnbsp-crlf", "Gmail web (2023+, CRLF)", "top", L(
        "Great, thanks!", "",
        f"On Mon, Mar 4, 2024 at 9:15{NNBSP}AM Jane Doe <jane.doe@example.com> wrote:", "",
        "> Sent you the file.", ">", "", eol="\r\n"),
        "Great, thanks!"),
    Case("gmail-en-wrap-at-angle", "Gmail web", "top", L(
        "Yes please, go ahead and book it.", "",
        "On Tue, Jan 9, 2024 at 10:02 AM Alexandra Konstantinopoulou <",
        "alexandra.konstantinopoulou@example.org> wrote:", "",
        "> Shall I book the venue for the 20th?", ""),
        "Yes please, go ahead and book it."),
    Case("gmail-en-wrap-wrote", "Gmail web", "top", L(
        "Thanks, received.", "",
        "On Wed, Feb 14, 2024 at 4:47 PM Maximilian Featherstonehaugh <max.f@example.co.uk>",
        "wrote:", "",
        "> Attached is the signed contract.", ">", ""),
        "Thanks, received."),
    Case("gmail-en-nested", "Gmail web", "top", L(
        "Ok, I'll tell her.", "",
        "On Fri, Mar 8, 2024 at 11:30 AM Bob Lee <bob.lee@example.com> wrote:", "",
        "> Can you let Sarah know?", ">",
        "> On Fri, Mar 8, 2024 at 11:00 AM Sarah Kim <sarah.kim@example.com> wrote:", ">",
        ">> The venue changed to the Grand Hall.", ">>", ""),
        "Ok, I'll tell her."),
    Case("gmail-en-no-name", "Gmail web", "top", L(
        "Unsubscribe me please.", "",
        "On Mon, Mar 4, 2024 at 9:15 AM <newsletter@example.com> wrote:", "",
        "> This week's deals!", ""),
        "Unsubscribe me please."),
    Case("gmail-android-en-gb", "Gmail Android", "top", L(
        "I'll be 10 minutes late", "",
        "On Mon, 4 Mar 2024, 09:15 John Smith, <john.smith@example.com> wrote:", "",
        "> Meet at the station?", ""),
        "I'll be 10 minutes late"),
    Case("gmail-old-no-wrote", "Gmail (2011-2012)", "top", L(
        "Done.", "",
        "2012/5/14 Jane Doe <jane.doe@example.com>", "",
        "> Please send the report.", ""),
        "Done."),
    Case("gmail-fr", "Gmail web", "top", L(
        "Parfait, merci beaucoup !", "",
        f"Le lun. 4 mars 2024 à 09:15, Jean Dupont <jean.dupont@example.fr> a écrit{NBSP}:", "",
        "> Bonjour,", ">", "> Pouvez-vous confirmer la réunion de jeudi ?", ">", "> Jean", ""),
        "Parfait, merci beaucoup !"),
    Case("gmail-fr-wrap", "Gmail web", "top", L(
        "Oui, c'est bon pour moi.", "",
        "Le mer. 6 mars 2024 à 14:02, Marie-Christine Lefèvre-Beaumont <",
        "marie-christine.lefevre@example.fr> a écrit :", "",
        "> On valide le devis ?", ""),
        "Oui, c'est bon pour moi."),
    Case("gmail-de", "Gmail web", "top", L(
        "Danke, passt so.", "",
        "Am Mo., 4. März 2024 um 09:15 Uhr schrieb Hans Müller <hans.mueller@example.de>:", "",
        "> Hallo,", "> passt dir Donnerstag?", ""),
        "Danke, passt so."),
    Case("gmail-es", "Gmail web", "top", L(
        "Perfecto, nos vemos el jueves.", "",
        "El lun, 4 mar 2024 a las 9:15, Juan Pérez (<juan.perez@example.es>) escribió:", "",
        "> Hola, ¿seguimos con la reunión del jueves?", ""),
        "Perfecto, nos vemos el jueves."),
    Case("gmail-it", "Gmail web", "top", L(
        "Va bene, grazie.", "",
        "Il giorno lun 4 mar 2024 alle ore 09:15 Mario Rossi <mario.rossi@example.it> ha scritto:", "",
        "> Ciao, confermi per giovedì?", ""),
        "Va bene, grazie."),
    Case("gmail-pt", "Gmail web", "top", L(
        "Combinado, até quinta.", "",
        "Em seg., 4 de mar. de 2024 às 09:15, João Silva <joao.silva@example.com.br> escreveu:", "",
        "> Oi, a reunião de quinta está confirmada?", ""),
        "Combinado, até quinta."),
    Case("gmail-nl", "Gmail web", "top", L(
        "Prima, tot donderdag.", "",
        "Op ma 4 mrt 2024 om 09:15 schreef Jan de Vries <jan.devries@example.nl>:", "",
        "> Hoi, gaat donderdag nog door?", ""),
        "Prima, tot donderdag."),
    Case("gmail-sv", "Gmail web", "top", L(
        "Låter bra, vi ses på torsdag.", "",
        "Den mån 4 mars 2024 kl 09:15 skrev Sven Svensson <sven.svensson@example.se>:", "",
        "> Hej, blir det torsdag?", ""),
        "Låter bra, vi ses på torsdag."),
    Case("gmail-da", "Gmail web", "top", L(
        "Det er fint med mig.", "",
        "Den man. 4. mar. 2024 kl. 09.15 skrev Lars Hansen <lars.hansen@example.dk>:", "",
        "> Hej, passer torsdag?", ""),
        "Det er fint med mig."),
    Case("gmail-pl", "Gmail web", "top", L(
        "Pasuje, do zobaczenia w czwartek.", "",
        "pon., 4 mar 2024 o 09:15 Jan Kowalski <jan.kowalski@example.pl> napisał(a):", "",
        "> Cześć, czy czwartek jest aktualny?", ""),
        "Pasuje, do zobaczenia w czwartek."),
    Case("gmail-ru", "Gmail web", "top", L(
        "Да, подходит.", "",
        "пн, 4 мар. 2024 г. в 09:15, Иван Петров <ivan.petrov@example.ru>:", "",
        "> Привет, в четверг в силе?", ""),
        "Да, подходит.", note="Gmail's Russian attribution has no verb: date, name, address, colon"),
    Case("gmail-ru-wrap", "Gmail web", "top", L(
        "Спасибо, получил.", "",
        "пн, 4 мар. 2024 г. в 09:15, Александра Константинопольская <",
        "aleksandra.k@example.ru>:", "",
        "> Высылаю договор.", ""),
        "Спасибо, получил."),
    Case("gmail-ja", "Gmail web", "top", L(
        "承知しました。木曜日に伺います。", "",
        "2024年3月4日(月) 9:15 山田太郎 <taro.yamada@example.jp>:", "",
        "> 木曜日の打ち合わせは予定通りですか？", ""),
        "承知しました。木曜日に伺います。"),
    # --- Apple Mail macOS / iOS ------------------------------------------------------------------
    Case("apple-mac-en", "Apple Mail macOS", "top", L(
        "Hello", "",
        "> On 22 Aug 2015, at 19:21, Adam Smith <adam.smith@example.com> wrote:", ">",
        "> Hi there!", ""),
        "Hello"),
    Case("apple-mac-us-signoff", "Apple Mail macOS", "top", L(
        "Yes — let's go with option B.", "", "Best,", "Priya", "",
        "> On Mar 4, 2024, at 09:15, Tom Becker <tom.becker@example.com> wrote:", "> ",
        "> Option A or B?", "> ", "> Tom", ""),
        "Yes — let's go with option B. Best, Priya", accept=("Yes — let's go with option B.",), note=SIGNOFF),
    Case("apple-ios-en", "iOS Mail", "footer", L(
        "Will do 👍", "", "Sent from my iPhone", "",
        "> On Mar 4, 2024, at 9:15 AM, Adam Smith <adam.smith@example.com> wrote:", ">",
        "> Can you pick up the keys?", ""),
        "Will do 👍"),
    Case("apple-ios-fr", "iOS Mail", "footer", L(
        "D'accord, je m'en occupe.", "", "Envoyé de mon iPhone", "",
        f"> Le 4 mars 2024 à 09:15, Jean Dupont <jean.dupont@example.fr> a écrit{NBSP}:", ">",
        "> Tu peux t'occuper du dossier ?", ""),
        "D'accord, je m'en occupe."),
    Case("apple-ios-de", "iOS Mail", "footer", L(
        "Ja, mache ich.", "", "Von meinem iPhone gesendet", "",
        "> Am 04.03.2024 um 09:15 schrieb Hans Müller <hans.mueller@example.de>:", ">",
        "> Kannst du das übernehmen?", ""),
        "Ja, mache ich."),
    Case("apple-ios-es", "iOS Mail", "footer", L(
        "Sí, claro.", "", "Enviado desde mi iPhone", "",
        "> El 4 mar 2024, a las 9:15, Juan Pérez <juan.perez@example.es> escribió:", ">",
        "> ¿Puedes encargarte?", ""),
        "Sí, claro."),
    Case("apple-ios-nl", "iOS Mail", "footer", L(
        "Komt goed.", "", "Verstuurd vanaf mijn iPhone", "",
        "> Op 4 mrt. 2024 om 09:15 heeft Jan de Vries <jan.devries@example.nl> het volgende geschreven:", ">",
        "> Kun jij dit oppakken?", ""),
        "Komt goed."),
    Case("apple-ios-no", "iOS Mail", "footer", L(
        "Skal bli.", "", "Sendt fra min iPhone", "",
        "> 4. mar. 2024 kl. 09:15 skrev Ola Nordmann <ola.nordmann@example.no>:", ">",
        "> Kan du ta deg av det?", ""),
        "Skal bli."),
    Case("apple-ios-pl", "iOS Mail", "footer", L(
        "Jasne, zajmę się tym.", "", "Wysłane z iPhone'a", "",
        "> Wiadomość napisana przez Jan Kowalski <jan.kowalski@example.pl> w dniu 04.03.2024, o godz. 09:15:",
        ">", "> Zajmiesz się tym?", ""),
        "Jasne, zajmę się tym."),
    Case("apple-ios-ru", "iOS Mail", "footer", L(
        "Хорошо, сделаю.", "", "Отправлено с iPhone", "",
        "> 4 марта 2024 г., в 09:15, Иван Петров <ivan.petrov@example.ru> написал(а):", ">",
        "> Сможешь заняться?", ""),
        "Хорошо, сделаю."),
    Case("apple-ios-ja", "iOS Mail", "footer", L(
        "了解です。", "", "iPhoneから送信", "",
        "> 2024/03/04 9:15、山田太郎 <taro.yamada@example.jp>のメール:", ">",
        "> お願いできますか？", ""),
        "了解です。"),
    Case("apple-ios-unmarked-history", "iOS Mail (text of an HTML reply)", "footer", L(
        "Sure, 3pm.", "", "Sent from my iPhone", "",
        "On Mar 4, 2024, at 9:15 AM, Jane Doe <jane.doe@example.com> wrote:", "",
        "Can we meet at 3?", ""),
        "Sure, 3pm."),
    # --- Outlook desktop / web / Mac / iOS / Android -----------------------------------------------
    Case("outlook-en", "Outlook desktop", "top", L(
        "Approved, thanks.", "", "Mark", "",
        "From: Jane Doe <jane.doe@contoso.com>", "Sent: Monday, March 4, 2024 9:15 AM",
        "To: Mark Chen <mark.chen@contoso.com>", "Subject: Q2 budget", "",
        "Hi Mark,", "", "Can you approve the Q2 budget?", "", "Thanks,", "Jane", ""),
        "Approved, thanks. Mark", subject="RE: Q2 budget"),
    Case("outlook-en-crlf-nbsp", "Outlook desktop (text of HTML, CRLF)", "top", L(
        "Hi Jane,", NBSP, "Done – the invoice is paid.", NBSP, "Regards,", "Mark", NBSP,
        "From: Jane Doe <jane.doe@contoso.com> ", "Sent: Monday, March 4, 2024 9:15 AM",
        "To: Mark Chen <mark.chen@contoso.com>", "Cc: Finance <finance@contoso.com>",
        "Subject: RE: Invoice 4471", "Importance: High", NBSP,
        "Hi Mark, please pay invoice 4471.", "", eol="\r\n"),
        "Hi Jane, Done – the invoice is paid. Regards, Mark", subject="RE: Invoice 4471",
        accept=("Hi Jane, Done – the invoice is paid.",), note=SIGNOFF),
    Case("outlook-web-rule", "Outlook web", "top", L(
        "Works for me.", "", "________________________________",
        "From: Jane Doe <jane.doe@contoso.com>", "Sent: Monday, March 4, 2024 9:15:00 AM",
        "To: Mark Chen <mark.chen@contoso.com>", "Subject: Lunch Thursday?", "",
        "Lunch Thursday?", ""),
        "Works for me.", subject="Re: Lunch Thursday?"),
    Case("outlook-mac-date", "Outlook for Mac", "top", L(
        "Sure.", "",
        "From: Jane Doe <jane.doe@contoso.com>", "Date: Monday, 4 March 2024 at 09:15",
        "To: Mark Chen <mark.chen@contoso.com>", "Subject: Slides", "",
        "Can you send the slides?", ""),
        "Sure.", subject="Re: Slides"),
    Case("outlook-ios-en", "Outlook iOS", "footer", L(
        "Yes, send it.", "", "Get Outlook for iOS<https://aka.ms/o0ukef>", "________________________________",
        "From: Jane Doe <jane.doe@contoso.com>", "Sent: Monday, March 4, 2024 9:15:23 AM",
        "To: Mark Chen <mark.chen@contoso.com>", "Subject: Contract", "",
        "Shall I send the contract?", ""),
        "Yes, send it.", subject="Re: Contract"),
    Case("outlook-android-no-rule", "Outlook Android", "footer", L(
        "On my way.", "", "Get Outlook for Android<https://aka.ms/ghei36>", "",
        "From: Jane Doe <jane.doe@contoso.com>", "Sent: Monday, March 4, 2024 9:15:23 AM",
        "To: Mark Chen <mark.chen@contoso.com>", "Subject: Where are you?", "",
        "Where are you?", ""),
        "On my way.", subject="Re: Where are you?"),
    Case("outlook-ios-footer-only", "Outlook iOS", "footer", L(
        "Confirmed.", "", "Get Outlook for iOS<https://aka.ms/o0ukef>"),
        "Confirmed."),
    Case("outlook-fr", "Outlook desktop", "top", L(
        "Bonjour Jean,", "", "C'est noté, merci.", "",
        f"De{NBSP}: Jean Dupont <jean.dupont@example.fr>", f"Envoyé{NBSP}: lundi 4 mars 2024 09:15",
        f"À{NBSP}: Marie Martin <marie.martin@example.fr>", f"Objet{NBSP}: Réunion jeudi", "",
        "Bonjour Marie,", "La réunion est maintenue.", ""),
        "Bonjour Jean, C'est noté, merci.", subject="RE: Réunion jeudi"),
    Case("outlook-ios-fr", "Outlook iOS", "footer", L(
        "Oui, envoie-le.", "", "Obtenir Outlook pour iOS<https://aka.ms/o0ukef>", "________________________________",
        "De : Jean Dupont <jean.dupont@example.fr>", "Envoyé : Monday, March 4, 2024 9:15:23 AM",
        "À : Marie Martin <marie.martin@example.fr>", "Objet : Contrat", "",
        "J'envoie le contrat ?", ""),
        "Oui, envoie-le.", subject="Re: Contrat"),
    Case("outlook-de", "Outlook desktop", "top", L(
        "Hallo Hans,", "", "ist erledigt.", "", "Viele Grüße", "Anna", "",
        "Von: Hans Müller <hans.mueller@example.de>", "Gesendet: Montag, 4. März 2024 09:15",
        "An: Anna Schmidt <anna.schmidt@example.de>", "Betreff: Rechnung", "",
        "Hallo Anna,", "bitte die Rechnung prüfen.", ""),
        "Hallo Hans, ist erledigt. Viele Grüße Anna", subject="AW: Rechnung",
        accept=("Hallo Hans, ist erledigt.",), note=SIGNOFF),
    Case("outlook-android-de", "Outlook Android", "footer", L(
        "Passt.", "", "Outlook für Android herunterladen<https://aka.ms/ghei36>", "________________________________",
        "Von: Hans Müller <hans.mueller@example.de>", "Gesendet: Monday, March 4, 2024 9:15:23 AM",
        "An: Anna Schmidt <anna.schmidt@example.de>", "Betreff: Termin", "",
        "Passt der Termin?", ""),
        "Passt.", subject="AW: Termin"),
    Case("outlook-it", "Outlook desktop", "top", L(
        "Ok, procedo.", "",
        "Da: Mario Rossi <mario.rossi@example.it>", "Inviato: lunedì 4 marzo 2024 09:15",
        "A: Luca Bianchi <luca.bianchi@example.it>", "Oggetto: Ordine", "",
        "Puoi procedere con l'ordine?", ""),
        "Ok, procedo.", subject="R: Ordine"),
    Case("outlook-es", "Outlook desktop", "top", L(
        "De acuerdo.", "",
        "De: Juan Pérez <juan.perez@example.es>", "Enviado el: lunes, 4 de marzo de 2024 9:15",
        "Para: Ana García <ana.garcia@example.es>", "Asunto: Pedido", "",
        "¿Seguimos con el pedido?", ""),
        "De acuerdo.", subject="RE: Pedido"),
    Case("outlook-nl", "Outlook desktop", "top", L(
        "Akkoord.", "",
        "Van: Jan de Vries <jan.devries@example.nl>", "Verzonden: maandag 4 maart 2024 09:15",
        "Aan: Piet Jansen <piet.jansen@example.nl>", "Onderwerp: Offerte", "",
        "Ga je akkoord met de offerte?", ""),
        "Akkoord.", subject="RE: Offerte"),
    Case("outlook-sv", "Outlook desktop", "top", L(
        "Ja, kör.", "",
        "Från: Sven Svensson <sven.svensson@example.se>", "Skickat: den 4 mars 2024 09:15",
        "Till: Karin Berg <karin.berg@example.se>", "Ämne: Offert", "",
        "Ska vi köra?", ""),
        "Ja, kör.", subject="SV: Offert"),
    Case("outlook-pl", "Outlook desktop", "top", L(
        "Zgoda.", "",
        "Od: Jan Kowalski <jan.kowalski@example.pl>", "Wysłano: poniedziałek, 4 marca 2024 09:15",
        "Do: Anna Nowak <anna.nowak@example.pl>", "Temat: Oferta", "",
        "Zgoda na ofertę?", ""),
        "Zgoda.", subject="Odp: Oferta"),
    Case("outlook-ru", "Outlook desktop", "top", L(
        "Согласен.", "",
        "От: Иван Петров <ivan.petrov@example.ru>", "Отправлено: 4 марта 2024 г. 9:15",
        "Кому: Анна Смирнова <anna.smirnova@example.ru>", "Тема: Предложение", "",
        "Согласен с предложением?", ""),
        "Согласен.", subject="RE: Предложение"),
    Case("outlook-ja", "Outlook desktop", "top", L(
        "承知しました。", "",
        "差出人: 山田太郎 <taro.yamada@example.jp>", "送信日時: 2024年3月4日 9:15",
        "宛先: 佐藤花子 <hanako.sato@example.jp>", "件名: 見積もり", "",
        "見積もりをご確認ください。", ""),
        "承知しました。", subject="RE: 見積もり"),
    Case("outlook-signature-then-rule", "Outlook desktop", "signature", L(
        "Approved.", "", "Mark Chen | CFO | Contoso", "",
        "_____________________________________________",
        "From: Jane Doe <jane.doe@contoso.com>", "Sent: Monday, March 4, 2024 9:15 AM",
        "To: Mark Chen <mark.chen@contoso.com>", "Subject: Travel request", "",
        "Please approve my travel request.", ""),
        "Approved. Mark Chen | CFO | Contoso", subject="RE: Travel request",
        note="ambiguous: a one-line signature with no delimiter is kept (when unsure, keep)"),
    Case("windows-mail", "Mail for Windows", "footer", L(
        "Ok.", "", "Sent from Mail for Windows", "",
        "From: Jane Doe", "Sent: Monday, March 4, 2024 9:15 AM", "To: Mark Chen", "Subject: Plans", "",
        "Ok?", ""),
        "Ok.", subject="RE: Plans"),

    # --- the "Original Message" family ----------------------------------------------------------------
    Case("origmsg-en", "Outlook 2003-2010", "top", L(
        "Please go ahead.", "", "-----Original Message-----",
        "From: Jane Doe [mailto:jane.doe@contoso.com] ", "Sent: Monday, March 04, 2024 9:15 AM",
        "To: Mark Chen", "Subject: RE: Purchase order", "",
        "Can I place the order?", ""),
        "Please go ahead.", subject="RE: Purchase order"),
    Case("origmsg-de", "Outlook 2003-2010", "top", L(
        "Einverstanden.", "", "-----Ursprüngliche Nachricht-----",
        "Von: Hans Müller [mailto:hans.mueller@example.de] ", "Gesendet: Montag, 4. März 2024 09:15",
        "An: Anna Schmidt", "Betreff: Bestellung", "",
        "Darf ich bestellen?", ""),
        "Einverstanden.", subject="AW: Bestellung"),
    Case("origmsg-fr", "Outlook 2003-2010", "top", L(
        "OK pour moi.", "", "-----Message d'origine-----",
        "De : Jean Dupont [mailto:jean.dupont@example.fr] ", "Envoyé : lundi 4 mars 2024 09:15",
        "À : Marie Martin", "Objet : Commande", "",
        "Je passe la commande ?", ""),
        "OK pour moi.", subject="RE: Commande"),
    Case("origmsg-ru", "Outlook 2003-2010", "top", L(
        "Да, заказывай.", "", "-----Исходное сообщение-----",
        "От: Иван Петров [mailto:ivan.petrov@example.ru] ", "Отправлено: 4 марта 2024 г. 9:15",
        "Кому: Анна Смирнова", "Тема: Заказ", "",
        "Заказываю?", ""),
        "Да, заказывай.", subject="RE: Заказ"),
    Case("zimbra-en", "Zimbra", "top", L(
        "Noted.", "", "----- Original Message -----",
        "From: \"Jane Doe\" <jane.doe@example.com>", "To: \"Mark Chen\" <mark.chen@example.com>",
        "Sent: Monday, March 4, 2024 9:15:00 AM", "Subject: Server maintenance", "",
        "Maintenance is tonight.", ""),
        "Noted.", subject="Re: Server maintenance"),
    Case("blackberry-10", "BlackBerry 10", "footer", L(
        "Call me when you land.", "Sent from my BlackBerry 10 smartphone.", "  Original Message  ",
        "From: Jane Doe", "Sent: Monday, March 4, 2024 09:15", "To: Mark Chen",
        "Reply To: jane.doe@example.com", "Subject: Flight", "",
        "Boarding now.", ""),
        "Call me when you land.", subject="Re: Flight"),
    # --- Thunderbird, Yahoo, Proton, Fastmail, Samsung, Spark, Superhuman, K-9, others ----------------
    Case("thunderbird-en", "Thunderbird", "top", L(
        "Thanks, merged.", "", "On 3/4/24 09:15, Jane Doe wrote:",
        "> Could you merge the PR?", ">", "> Jane", ""),
        "Thanks, merged."),
    Case("thunderbird-de", "Thunderbird", "top", L(
        "Danke!", "", "Am 04.03.24 um 09:15 schrieb Hans Müller:", "> Hier ist die Datei.", ""),
        "Danke!"),
    Case("yahoo-en", "Yahoo Mail web", "top", L(
        "Sounds great!", "", "",
        "On Monday, March 4, 2024, 09:15:22 AM EST, Jane Doe <jane.doe@yahoo.com> wrote:", "", "",
        "Hi, are you coming on Saturday?", ""),
        "Sounds great!"),
    Case("yahoo-de", "Yahoo Mail web", "top", L(
        "Gerne.", "", "",
        "Am Montag, 4. März 2024 um 09:15:22 MEZ hat Hans Müller <hans.mueller@yahoo.de> Folgendes geschrieben:",
        "", "", "Kommst du am Samstag?", ""),
        "Gerne."),
    Case("yahoo-classic-block", "Yahoo Mail (classic)", "top", L(
        "Yes.", "", "", "________________________________",
        " From: Jane Doe <jane.doe@yahoo.com>", " To: Mark Chen <mark.chen@example.com> ",
        " Sent: Monday, March 4, 2024 9:15 AM", " Subject: Saturday", " ",
        "Are you coming?", ""),
        "Yes.", subject="Re: Saturday"),
    Case("yahoo-android-one-line", "Yahoo Mail Android", "footer", L(
        "See you there", "", "Sent from Yahoo Mail on Android", "",
        "  On Mon, Mar 4, 2024 at 9:15, Jane Doe<jane.doe@yahoo.com> wrote:   Are you coming on Saturday?  ", ""),
        "See you there", note="Yahoo's mobile text part puts the quoted message on the attribution's line"),
    Case("proton", "Proton Mail", "footer", L(
        "Confirmed.", "", "Sent with Proton Mail secure email.", "",
        "On Monday, March 4th, 2024 at 09:15, Jane Doe <jane.doe@proton.me> wrote:", "",
        "> Can you confirm the booking?", ""),
        "Confirmed."),
    Case("protonmail-old-unicode-dashes", "ProtonMail (2019)", "footer", L(
        "Got it.", "", "Sent with ProtonMail Secure Email.", "",
        "\u2010\u2010\u2010\u2010\u2010\u2010\u2010 Original Message \u2010\u2010\u2010\u2010\u2010\u2010\u2010",
        "On Monday, March 4, 2024 9:15 AM, Jane Doe <jane.doe@example.com> wrote:", "",
        "> Did you get the file?", ""),
        "Got it."),
    Case("fastmail-signature", "Fastmail", "signature", L(
        "Yes, all done.", "", "--", "  Mark Chen", "  mark.chen@fastmail.com", "",
        "On Mon, 4 Mar 2024, at 09:15, Jane Doe wrote:", "> Is the migration done?", ""),
        "Yes, all done."),
    Case("samsung-en", "Samsung Email", "footer", L(
        "I'll be there at 6.", "", "", "", "Sent from my Galaxy", "", "",
        "-------- Original message --------", "From: Jane Doe <jane.doe@example.com> ",
        "Date: 04/03/2024 09:15 (GMT+00:00) ", "To: Mark Chen <mark.chen@example.com> ",
        "Subject: Dinner ", "", "What time?", ""),
        "I'll be there at 6.", subject="Re: Dinner"),
    Case("samsung-de", "Samsung Email", "footer", L(
        "Bin um 6 da.", "", "", "", "Von meinem Samsung Galaxy Smartphone gesendet.", "", "",
        "-------- Ursprüngliche Nachricht --------", "Von: Hans Müller <hans.mueller@example.de> ",
        "Datum: 04.03.24 09:15 (GMT+01:00) ", "An: Anna Schmidt <anna.schmidt@example.de> ",
        "Betreff: Abendessen ", "", "Wann?", ""),
        "Bin um 6 da.", subject="AW: Abendessen"),
    Case("samsung-fr", "Samsung Email", "footer", L(
        "J'arrive à 18h.", "", "", "", "Envoyé depuis mon smartphone Samsung Galaxy.", "", "",
        "-------- Message d'origine --------", "De : Jean Dupont <jean.dupont@example.fr> ",
        "Date : 04/03/2024 09:15 (GMT+01:00) ", "À : Marie Martin <marie.martin@example.fr> ",
        "Objet : Dîner ", "", "À quelle heure ?", ""),
        "J'arrive à 18h.", subject="RE: Dîner"),
    Case("spark", "Spark", "top", L(
        "Looks good to me.", "", "Mark", "",
        "On 4 Mar 2024, 09:15 +0100, Jane Doe <jane.doe@example.com>, wrote:",
        "> Can you check the draft?", ""),
        "Looks good to me. Mark"),
    Case("superhuman", "Superhuman iOS", "footer", L(
        "Let's do it.", "", "Sent via Superhuman iOS", "", "",
        "On Mon, Mar 04, 2024 at 9:15 AM, Jane Doe <jane.doe@example.com> wrote:", "",
        "> Should we launch Monday?", ""),
        "Let's do it."),
    Case("k9-en", "K-9 Mail", "signature", L(
        "Yep, tomorrow.", "-- ", "Sent from my Android device with K-9 Mail. Please excuse my brevity.", "",
        "On March 4, 2024 9:15:00 AM GMT+01:00, Jane Doe <jane.doe@example.com> wrote:",
        ">Are you coming tomorrow?", ""),
        "Yep, tomorrow."),
    Case("airmail-parens", "Airmail", "top", L(
        "Received, thank you.", "",
        "On March 4, 2024 at 9:15:08 AM, Jane Doe (jane.doe@example.com) wrote:", "",
        "> Here are the tickets.", ""),
        "Received, thank you."),
    Case("gmx-de", "GMX / WEB.DE", "top", L(
        "Ja, gerne.", "", "Gesendet: Montag, 04. März 2024 um 09:15 Uhr",
        "Von: \"Hans Müller\" <hans.mueller@gmx.de>", "An: anna.schmidt@web.de", "Betreff: Treffen",
        "Kommst du?", ""),
        "Ja, gerne.", subject="Aw: Treffen"),
    Case("hotmail-date-block", "Hotmail (2010)", "top", L(
        "Fine by me.", "", "Date: Mon, 4 Mar 2024 09:15:00 +0000", "From: jane.doe@hotmail.com",
        "To: mark.chen@example.com", "Subject: Plans", "", "Is Friday fine?", ""),
        "Fine by me.", subject="RE: Plans"),
    Case("yandex", "Yandex Mail", "top", L(
        "Да, в силе.", "", "04.03.2024, 09:15, \"Иван Петров\" <ivan.petrov@yandex.ru>:",
        "> Встреча в силе?", ""),
        "Да, в силе."),
    Case("mailru", "Mail.ru", "top", L(
        "Хорошо.", "", "",
        "Понедельник, 4 марта 2024, 9:15 +03:00 от Иван Петров <ivan.petrov@mail.ru>:", "",
        "> Встреча в силе?", ""),
        "Хорошо."),
    Case("mutt-star", "mutt", "top", L(
        "Thanks, fixed in v3.", "", "* Jane Doe <jane.doe@example.com> [2024-03-04 09:15]:",
        "> Typo on line 3.", ""),
        "Thanks, fixed in v3."),
    Case("one-line-reply-and-attribution", "mobile client (joined line)", "top", L(
        "Sure thing, see you at 8. On Mon, Mar 4, 2024 at 9:15 AM Jane Doe <jane.doe@example.com> wrote:",
        "> Dinner at 8?", ""),
        "Sure thing, see you at 8."),
    Case("quoted-wrap-lost-marker", "Gmail (hard-wrapped quote)", "top", L(
        "Fine.", "", "On Mon, Mar 4, 2024 at 9:15 AM Jane Doe <jane.doe@example.com> wrote:",
        "> I would like to move the weekly meeting from Tuesday to Wednesday because",
        "several people are travelling.", ">", "> Jane", ""),
        "Fine."),

    # --- mailing lists --------------------------------------------------------------------------------
    Case("digest-reply", "Gmail, reply to a Mailman digest", "top", L(
        "Agreed with Paul on point 2.", "",
        "On Mon, Mar 4, 2024 at 9:15 AM <dev-request@lists.example.org> wrote:", "",
        "> Send dev mailing list submissions to", ">         dev@lists.example.org", ">",
        "> Today's Topics:", ">", ">    1. Re: Release plan (Paul Adams)", ">",
        "> ----------------------------------------------------------------------", ">",
        "> Message: 1", "> Date: Mon, 4 Mar 2024 08:00:00 +0000", "> From: Paul Adams <paul@example.org>", ""),
        "Agreed with Paul on point 2."),
    Case("google-groups-footer-quoted", "Gmail, reply to a Google Group", "top", L(
        "+1, ship it.", "", "On Mon, Mar 4, 2024 at 9:15 AM Paul Adams <paul@example.org> wrote:",
        "> Release candidate is ready.", ">", "> -- ",
        "> You received this message because you are subscribed to the Google Groups \"dev\" group.", ""),
        "+1, ship it."),

    # --- inline answers --------------------------------------------------------------------------------
    Case("inline-gmail", "Gmail web", "inline", L(
        "Hi Jane,", "", "On Mon, Mar 4, 2024 at 9:15 AM Jane Doe <jane.doe@example.com> wrote:", "",
        "> 1. Can you send the slides?", ">", "", "Sent them this morning.", "",
        "> 2. Are you joining the dinner?", ">", "", "Yes, with my partner.", "",
        "> Thanks,", "> Jane", ""),
        "Hi Jane, Sent them this morning. Yes, with my partner.",
        accept=(("Hi Jane, > 1. Can you send the slides? Sent them this morning. "
                "> 2. Are you joining the dinner? Yes, with my partner."),
                ("Hi Jane, > 1. Can you send the slides? > Sent them this morning. "
                "> 2. Are you joining the dinner? > Yes, with my partner."))),
    Case("inline-thunderbird-signature", "Thunderbird", "inline", L(
        "On 3/4/24 09:15, Jane Doe wrote:", "> Can you review the draft by Friday?", "",
        "Yes, I'll have it done Thursday.", "", "> Also, do we need a new logo?", "",
        "No, keep the current one.", "", "-- ", "Mark Chen", "Acme Corp", ""),
        "Yes, I'll have it done Thursday. No, keep the current one.",
        accept=(("> Can you review the draft by Friday? Yes, I'll have it done Thursday. "
                "> Also, do we need a new logo? No, keep the current one."),)),
    Case("inline-bottom-post", "Thunderbird", "inline", L(
        "On 3/4/24 09:15, Jane Doe wrote:", "> Are you coming to the party?", "",
        "Yes! I'll bring dessert.", ""),
        "Yes! I'll bring dessert.",
        accept=("> Are you coming to the party? Yes! I'll bring dessert.",)),
    Case("inline-mutt-patch", "mutt", "inline", L(
        "On Mon, Mar 04, 2024 at 09:15:00AM +0100, Jane Doe wrote:", "> Here is v2 of the patch.", ">",
        "> --- a/main.c", "> +++ b/main.c", "> @@ -1,3 +1,3 @@", ">  int x = 0;", "",
        "this should be unsigned.", "",
        "Reviewed-by: Mark Chen <mark.chen@example.com>", ""),
        "this should be unsigned. Reviewed-by: Mark Chen <mark.chen@example.com>",
        accept=(">  int x = 0; this should be unsigned. Reviewed-by: Mark Chen <mark.chen@example.com>",
                ("> Here is v2 of the patch. > > --- a/main.c > +++ b/main.c > @@ -1,3 +1,3 @@ >  int x = 0; "
                "this should be unsigned. Reviewed-by: Mark Chen <mark.chen@example.com>"))),
    Case("inline-digest", "reply to a digest", "inline", L(
        "> Message: 3", "> Date: Mon, 4 Mar 2024 09:15:00 +0000", "> From: Paul Adams <paul@example.org>",
        "> Subject: Re: [dev] Release plan", ">", "> I think we should ship on Friday.", "",
        "Agreed, Friday it is.", "", "Mark", ""),
        "Agreed, Friday it is. Mark",
        accept=("> I think we should ship on Friday. Agreed, Friday it is. Mark",)),
    Case("inline-nested-no-on", "Usenet-style", "inline", L(
        "Jane Doe <jane.doe@example.com> wrote:", "> Bob Lee <bob.lee@example.com> wrote:",
        ">> Can we move the call?", "> I can't on Tuesday.", "", "Wednesday then?", ""),
        "Wednesday then?",
        accept=("> I can't on Tuesday. Wednesday then?", ">> Can we move the call? > I can't on Tuesday. Wednesday then?")),
    Case("inline-snippet-then-history", "Gmail web", "inline", L(
        "> Can you do Tuesday?", "", "Yes, Tuesday at 2.", "",
        "On Mon, Mar 4, 2024 at 9:15 AM Jane Doe <jane.doe@example.com> wrote:", "",
        "> Can you do Tuesday?", ">", "> Jane", ""),
        "Yes, Tuesday at 2.",
        accept=("> Can you do Tuesday? Yes, Tuesday at 2.",)),

    # --- signatures ------------------------------------------------------------------------------------
    Case("sig-dashdash-space", "any (RFC 3676)", "signature", L(
        "Sounds good.", "", "-- ", "John Smith", "Senior Engineer | Acme Inc.", "+1 555 0100", "",
        "On Mon, Mar 4, 2024 at 9:15 AM Jane Doe <jane.doe@example.com> wrote:", "> Friday?", ""),
        "Sounds good."),
    Case("sig-dashdash-no-quote", "any", "signature", L(
        "I'll call you later.", "", "--", "Anna Schmidt", "Acme GmbH"),
        "I'll call you later."),
    Case("sig-signoff-kept", "any", "signature", L(
        "Thanks, that's all I needed.", "", "Cheers,", "Tom"),
        "Thanks, that's all I needed. Cheers, Tom", accept=("Thanks, that's all I needed.",), note=SIGNOFF),
    Case("sig-corporate-block-no-delimiter", "Outlook desktop", "signature", L(
        "Please proceed.", "", "Kind regards,", "", "Anna Schmidt", "Head of Finance",
        "Acme GmbH | Hauptstraße 1 | 10115 Berlin", "T +49 30 1234567", "",
        "From: Hans Müller <hans.mueller@example.de>", "Sent: Monday, March 4, 2024 9:15 AM",
        "To: Anna Schmidt <anna.schmidt@example.de>", "Subject: Payment run", "", "Can I start the payment run?", ""),
        "Please proceed. Kind regards, Anna Schmidt Head of Finance Acme GmbH | Hauptstraße 1 | 10115 Berlin "
        "T +49 30 1234567", subject="RE: Payment run",
        accept=("Please proceed. Kind regards, Anna Schmidt", "Please proceed."),
        note="ambiguous: a signature block with no delimiter; " + SIGNOFF),
    Case("sig-google-groups-footer", "Google Groups (own message)", "signature", L(
        "Meeting moved to 3pm.", "", "-- ",
        "You received this message because you are subscribed to the Google Groups \"team\" group.",
        "To unsubscribe from this group and stop receiving emails from it, send an email to "
        "team+unsubscribe@googlegroups.com.", ""),
        "Meeting moved to 3pm."),

    # --- footers alone -----------------------------------------------------------------------------------
    Case("footer-iphone-only", "iOS Mail", "footer", L("Yes", "", "Sent from my iPhone"), "Yes"),
    Case("footer-proton-android", "Proton Mail Android", "footer", L(
        "Paid.", "", "Sent from Proton Mail Android"),
        "Paid."),
    # --- the person's own words that look like quote markers ------------------------------------------
    Case("look-command-line", "any", "lookalike", L(
        "Can you run this on the server and send me the output?", "",
        "> sudo systemctl status nginx", "", "Thanks", "",
        "On Mon, Mar 4, 2024 at 9:15 AM Jane Doe <jane.doe@example.com> wrote:", "> Nginx seems down.", ""),
        "Can you run this on the server and send me the output? > sudo systemctl status nginx Thanks",
        note="a '>' line between two of the person's paragraphs is theirs, whatever it looks like"),
    Case("look-greater-than", "any", "lookalike", L(
        "> 200 people signed up, so please book the big room.", "",
        "On Mon, Mar 4, 2024 at 9:15 AM Jane Doe <jane.doe@example.com> wrote:", "> How many signed up?", ""),
        "> 200 people signed up, so please book the big room.",
        note="a first line starting '>' followed by an attribution: the person's, no quote has begun"),
    Case("look-python-prompt", "any", "lookalike", L(
        "This works for me:", "", ">>> import json", ">>> json.dumps({\"a\": 1})", "'{\"a\": 1}'", "",
        "Can you try it?"),
        "This works for me: >>> import json >>> json.dumps({\"a\": 1}) '{\"a\": 1}' Can you try it?"),
    Case("look-on-monday", "any", "lookalike", L(
        "On Monday I will be out of the office, so please send the report by Friday.", "",
        "On Fri, Mar 1, 2024 at 5:00 PM Jane Doe <jane.doe@example.com> wrote:", "> When do you need the report?", ""),
        "On Monday I will be out of the office, so please send the report by Friday."),
    Case("look-on-tuesday-wrote", "any", "lookalike", L(
        "On Tuesday the landlord wrote: we need access to the flat on Friday morning.",
        "Can you be there?"),
        "On Tuesday the landlord wrote: we need access to the flat on Friday morning. Can you be there?"),
    Case("look-on-date-name-wrote", "any", "lookalike", L(
        "On March 1, 2024, the bank wrote:", "", "\"Your card will be replaced.\"", "",
        "It never arrived. Please call them."),
        "On March 1, 2024, the bank wrote: \"Your card will be replaced.\" It never arrived. Please call them.",
        note="ambiguous shape, but there is no address and no quote marker: the person's"),
    Case("look-from-now-on", "any", "lookalike", L(
        "From: now on, send the weekly numbers to finance@example.com too.", "", "Thanks"),
        "From: now on, send the weekly numbers to finance@example.com too. Thanks"),
    Case("look-subject-heading", "any", "lookalike", L(
        "Subject: the Q2 numbers", "Please put them in the shared folder by Friday."),
        "Subject: the Q2 numbers Please put them in the shared folder by Friday."),
    Case("look-dashes-headings", "any", "lookalike", L(
        "Here is the plan:", "", "Step 1", "----------", "Back up the database.", "",
        "Step 2", "----------", "Run the migration."),
        "Here is the plan: Step 1 ---------- Back up the database. Step 2 ---------- Run the migration."),
    Case("look-framed-line", "any", "lookalike", L(
        "==== Please read ====", "The server will be down tonight from 22:00.", "===================="),
        "==== Please read ==== The server will be down tonight from 22:00. ===================="),
    Case("look-sent-from-my-desk", "any", "lookalike", L(
        "Sent from my desk, which is much easier than typing on my phone.", "", "The numbers look right."),
        "Sent from my desk, which is much easier than typing on my phone. The numbers look right."),
    Case("look-sent-from-iphone-sentence", "any", "lookalike", L(
        "Yes, approve it.", "", "Sent from my iPhone, so excuse the typos: the budget is 40k not 4k."),
        "Yes, approve it. Sent from my iPhone, so excuse the typos: the budget is 40k not 4k."),
    Case("look-name-address-line", "any", "lookalike", L(
        "Add this person to the list:", "Jane Doe <jane.doe@example.com>", "", "Thanks!"),
        "Add this person to the list: Jane Doe <jane.doe@example.com> Thanks!"),
    Case("look-wrote-in-sentence", "any", "lookalike", L(
        "As Jane wrote: the deadline cannot move.", "So let's cut scope instead."),
        "As Jane wrote: the deadline cannot move. So let's cut scope instead."),
    Case("look-original-message-phrase", "any", "lookalike", L(
        "The original message was fine; the edited one is wrong.", "Please resend the original message."),
        "The original message was fine; the edited one is wrong. Please resend the original message."),
    Case("look-underscore-blank", "any", "lookalike", L(
        "Fill in your name here: ____________", "and sign below."),
        "Fill in your name here: ____________ and sign below."),
    Case("look-underscore-line", "any", "lookalike", L(
        "Sign below and post it back:", "", "______________________________", "Signature"),
        "Sign below and post it back: ______________________________ Signature",
        note="ambiguous: a rule line with no header block after it is the person's"),
    Case("look-header-words-in-text", "any", "lookalike", L(
        "To: all staff", "Date: Friday", "Please clear your desks before the move."),
        "To: all staff Date: Friday Please clear your desks before the move.",
        note="two header-like lines with no From/address: the person's memo"),

    # --- replies to a Zerg alert --------------------------------------------------------------------
    Case("alert-gmail", "Gmail web", "alert", L(
        "Approve.", "", f"On Mon, Mar 4, 2024 at 9:15 AM Zerg <{ZERG_SENDER}> wrote:", "",
        "> The run deploy-api is waiting for your approval.", "> Reply APPROVE or DENY.", ""),
        "Approve.", subject="Re: [Zerg] Approve deploy of api v2.3?", alert=True),
    Case("alert-outlook", "Outlook web", "alert", L(
        "deny - wait until Monday", "", "________________________________",
        f"From: Zerg <{ZERG_SENDER}>", "Sent: Monday, March 4, 2024 9:15 AM",
        "To: Mark Chen <mark.chen@example.com>", "Subject: [Zerg] Approve deploy of api v2.3?", "",
        "The run deploy-api is waiting for your approval.", ""),
        "deny - wait until Monday", subject="RE: [Zerg] Approve deploy of api v2.3?", alert=True),
    Case("alert-yahoo-unmarked", "Yahoo Mail web", "alert", L(
        "yes go", "", "", f"On Monday, March 4, 2024, 09:15:22 AM EST, Zerg <{ZERG_SENDER}> wrote:", "", "",
        "The run deploy-api is waiting for your approval.", ""),
        "yes go", subject="Re: [Zerg] Approve deploy of api v2.3?", alert=True),
    Case("alert-inline", "Thunderbird", "alert", L(
        "On 3/4/24 09:15, Zerg wrote:", "> Renew example.org for 1 year or 2 years?", "",
        "2 years.", ""),
        "2 years.", subject="Re: [Zerg] Domain expiring", alert=True,
        accept=("> Renew example.org for 1 year or 2 years? 2 years.",)),
]
