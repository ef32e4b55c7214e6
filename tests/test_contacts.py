"""Contacts: adding one sends a 6-digit code (here, to the local outbox), the code verifies it;
wrong codes count, codes expire, another owner's address is refused without naming that owner,
and every read and change is the owner's own (API, service and CLI)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.api import call
from tests.support.notify import body_of, code_in, emails, texts, unique_email, unique_number, verified_contact
from zerg.cli.main import main
from zerg.notify import verification as service
from zerg.timestamps import utcnow


@pytest.fixture
def rt(runtime_env):
    return runtime_env()


def token(owner) -> str:
    status, body, _ = call("POST", "/api/jarvis/auth", {"device_secret": owner.device_secret})
    assert status == 200, body
    return body["token"]


def last_code(rt) -> str:
    return code_in(body_of(emails(rt.settings.data_dir)[-1]))


def test_adding_an_email_sends_a_code_that_verifies_it(rt, alice, pool):
    tok, address = token(alice), unique_email()

    status, added, _ = call("POST", "/api/jarvis/contacts", {"kind": "email", "address": f"  {address.upper()}  "}, token=tok)
    local, domain = address.split("@")
    assert status == 202 and added["code_sent"] is True
    assert added["contact"]["address"] == f"{local.upper()}@{domain}"  # the domain lower-cased, the local part kept
    address = added["contact"]["address"]
    assert added["contact"]["verified"] is False and added["contact"]["code_expires_at"]
    (mail,) = emails(rt.settings.data_dir)
    assert mail["To"] == address and mail["Subject"] == "Your Zerg verification code"
    code = code_in(body_of(mail))
    with pool.connection() as conn:  # only a salted hash is kept, and the notification masks the code
        stored = conn.execute("SELECT code_hash FROM owner_contacts WHERE address = %s", (address,)).fetchone()
        note = conn.execute("SELECT purpose, status, body FROM notifications WHERE id = %s",
                            (added["notification_id"],)).fetchone()
    assert code not in stored["code_hash"] and "$" in stored["code_hash"]
    assert note["purpose"] == "verification" and note["status"] == "sent" and code not in note["body"]

    status, contact, _ = call("POST", "/api/jarvis/contacts/verify", {"kind": "email", "address": address, "code": code},
                              token=tok)
    assert status == 200 and contact["verified"] is True and contact["verified_at"]
    status, listing, _ = call("GET", "/api/jarvis/contacts", token=tok)
    assert [(c["address"], c["verified"]) for c in listing["contacts"]] == [(address, True)]
    assert set(listing["contacts"][0]) == {"id", "kind", "address", "verified", "verified_at", "created_at", "code_expires_at",
                                          "opted_out_at"}
    assert listing["contacts"][0]["opted_out_at"] is None

    status, again, _ = call("POST", "/api/jarvis/contacts", {"kind": "email", "address": address}, token=tok)
    assert status == 202 and again["code_sent"] is False and len(emails(rt.settings.data_dir)) == 1  # verified: no code


def test_an_sms_contact_is_stored_in_e164_and_gets_its_code_by_sms(rt, alice):
    number = unique_number()
    spaced = f"{number[:2]} ({number[2:5]}) {number[5:8]}-{number[8:]}"
    added = service.add(rt, alice.owner_id, "sms", spaced)
    assert added.contact["address"] == number
    (sms,) = texts(rt.settings.data_dir)
    assert sms["to"] == number and len(sms["parts"]) == 1
    assert service.verify(rt, alice.owner_id, "sms", number, code_in(sms["parts"][0]))["verified"] is True


def test_wrong_codes_count_and_the_fifth_ends_the_code(rt, alice):
    address = unique_email()
    service.add(rt, alice.owner_id, "email", address)
    right = last_code(rt)
    wrong = f"{(int(right) + 1) % 10**6:06d}"
    for left in (4, 3, 2, 1):
        with pytest.raises(service.ContactError, match=f"wrong code for the email address {address}: {left} attempts? left"):
            service.verify(rt, alice.owner_id, "email", address, wrong)
    with pytest.raises(service.TooSoon, match="wrong code: no attempts left; 5 wrong codes were tried .* within 24 hours"):
        service.verify(rt, alice.owner_id, "email", address, wrong)
    with pytest.raises(service.TooSoon, match="5 wrong codes were tried") as refused:
        service.verify(rt, alice.owner_id, "email", address, right)  # even the right code, now
    assert refused.value.status == 429 and refused.value.retry_after > 23 * 3600

    later = utcnow() + service.CODE_WINDOW + timedelta(seconds=1)
    service.add(rt, alice.owner_id, "email", address, now=later)  # a new window: a new code, attempts start again
    assert service.verify(rt, alice.owner_id, "email", address, last_code(rt), now=later)["verified"] is True


def test_a_new_code_within_24_hours_does_not_give_the_wrong_guesses_back(rt, alice):
    address, start = unique_email(), utcnow()
    service.add(rt, alice.owner_id, "email", address, now=start)
    wrong = f"{(int(last_code(rt)) + 1) % 10**6:06d}"
    for left in (4, 3, 2):
        with pytest.raises(service.ContactError, match=f"{left} attempts left"):
            service.verify(rt, alice.owner_id, "email", address, wrong, now=start)

    resend = start + service.RESEND_AFTER + timedelta(seconds=1)
    service.add(rt, alice.owner_id, "email", address, now=resend)
    wrong = f"{(int(last_code(rt)) + 1) % 10**6:06d}"
    with pytest.raises(service.ContactError, match="1 attempt left"):  # the 4th guess of the window, not the 1st
        service.verify(rt, alice.owner_id, "email", address, wrong, now=resend)
    with pytest.raises(service.TooSoon, match="no attempts left"):
        service.verify(rt, alice.owner_id, "email", address, wrong, now=resend)

    again = resend + service.RESEND_AFTER + timedelta(seconds=1)
    sent = len(emails(rt.settings.data_dir))
    with pytest.raises(service.TooSoon, match=r"5 wrong codes were tried .* a new code can be sent after .* \(in 23 h 5\d min\)"):
        service.add(rt, alice.owner_id, "email", address, now=again)
    assert len(emails(rt.settings.data_dir)) == sent  # no code sent that could not be tried


def test_a_contact_gets_at_most_five_codes_in_24_hours(rt, alice):
    address, start = unique_email(), utcnow()
    for n in range(service.MAX_CODES):
        service.add(rt, alice.owner_id, "email", address, now=start + n * (service.RESEND_AFTER + timedelta(seconds=1)))
    sixth = start + 10 * service.RESEND_AFTER
    with pytest.raises(service.TooSoon, match=f"5 codes were sent to the email address {address} within 24 hours") as refused:
        service.add(rt, alice.owner_id, "email", address, now=sixth)
    assert refused.value.status == 429 and 0 < refused.value.retry_after <= 24 * 3600
    assert len(emails(rt.settings.data_dir)) == service.MAX_CODES

    next_day = start + service.CODE_WINDOW + timedelta(seconds=1)
    assert service.add(rt, alice.owner_id, "email", address, now=next_day).code_sent


def test_the_api_says_how_long_to_wait_when_a_contact_had_its_codes(rt, alice, pool):
    tok, address = token(alice), unique_email()
    assert call("POST", "/api/jarvis/contacts", {"kind": "email", "address": address}, token=tok)[0] == 202
    with pool.connection() as conn:  # as if the 5 codes of the window were sent over the last hours
        conn.execute("""UPDATE owner_contacts SET code_sends = 5, code_window_start = now() - interval '20 hours',
                        code_sent_at = now() - interval '1 hour' WHERE address = %s""", (address,))

    status, body, raw = call("POST", "/api/jarvis/contacts", {"kind": "email", "address": address}, token=tok)
    assert status == 429 and body["error"] == "too_many_requests"
    assert "5 codes were sent" in body["message"] and "(in 4 h 0 min)" in body["message"]
    assert 4 * 3600 - 60 <= int(raw["headers"]["Retry-After"]) <= 4 * 3600 + 1
    assert len(emails(rt.settings.data_dir)) == 1


def test_an_owner_gets_at_most_twenty_codes_a_day_whatever_the_daily_limit(rt, alice, bob, pool):
    with pool.connection() as conn:  # the owner's own limit is far above the cap: it is not what stops them
        conn.execute("INSERT INTO notification_policies (owner_id, daily_email_limit) VALUES (%s, 10000)",
                     (alice.owner_id,))
    first = service.add(rt, alice.owner_id, "email", unique_email())
    for _ in range(service.MAX_CODES_PER_OWNER - 1):
        service.add(rt, alice.owner_id, "email", unique_email())
    service.remove(rt, alice.owner_id, first.contact["id"])  # removing a contact gives no code back

    with pytest.raises(service.TooSoon, match="20 verification codes were sent for you within 24 hours") as refused:
        service.add(rt, alice.owner_id, "email", unique_email())
    assert refused.value.status == 429 and refused.value.retry_after > 23 * 3600
    assert len(emails(rt.settings.data_dir)) == service.MAX_CODES_PER_OWNER
    assert service.add(rt, bob.owner_id, "email", unique_email()).code_sent  # another owner's count is their own


def test_an_expired_code_is_refused_with_when_it_expired(rt, alice):
    address = unique_email()
    service.add(rt, alice.owner_id, "email", address)
    late = utcnow() + service.CODE_TTL + timedelta(seconds=1)
    with pytest.raises(service.ContactError, match=r"the code for the email address .* expired at \d\d:\d\d UTC"):
        service.verify(rt, alice.owner_id, "email", address, last_code(rt), now=late)


def test_a_new_code_waits_a_minute_and_replaces_the_old_one(rt, alice):
    tok, address = token(alice), unique_email()
    assert call("POST", "/api/jarvis/contacts", {"kind": "email", "address": address}, token=tok)[0] == 202
    first = last_code(rt)

    status, body, raw = call("POST", "/api/jarvis/contacts", {"kind": "email", "address": address}, token=tok)
    assert status == 429 and body["error"] == "too_many_requests" and "ask again in" in body["message"]
    assert 1 <= int(raw["headers"]["Retry-After"]) <= 61
    assert len(emails(rt.settings.data_dir)) == 1

    later = utcnow() + service.RESEND_AFTER + timedelta(seconds=1)
    service.add(rt, alice.owner_id, "email", address, now=later)
    second = last_code(rt)
    if second != first:  # one chance in a million they match
        with pytest.raises(service.ContactError, match="wrong code"):
            service.verify(rt, alice.owner_id, "email", address, first, now=later)
    assert service.verify(rt, alice.owner_id, "email", address, second, now=later)["verified"] is True


def test_an_address_another_owner_verified_is_refused_without_naming_them(rt, alice, bob):
    address = verified_contact(rt.pool, alice.owner_id, "email")["address"]

    status, body, _ = call("POST", "/api/jarvis/contacts", {"kind": "email", "address": address}, token=token(bob))
    assert status == 409 and body["error"] == "conflict"
    assert body["message"] == f"the email address {address} is verified by another owner; it cannot be added here"
    assert alice.name not in body["message"] and str(alice.owner_id) not in body["message"].replace(address, "")
    assert emails(rt.settings.data_dir) == []  # no code went to alice's address


def test_an_address_another_owner_verified_is_refused_in_any_case(rt, alice, bob):
    address = verified_contact(rt.pool, alice.owner_id, "email")["address"]  # owner-…@example.com
    shouted = address.upper()

    status, body, _ = call("POST", "/api/jarvis/contacts", {"kind": "email", "address": shouted}, token=token(bob))
    assert status == 409 and body["error"] == "conflict"  # before: 202, and a code went to alice's mailbox
    typed = f"{shouted.split('@')[0]}@example.com"  # as bob wrote it (the domain lower-cased), never alice's spelling
    assert body["message"] == f"the email address {typed} is verified by another owner; it cannot be added here"
    assert emails(rt.settings.data_dir) == [] and service.list_contacts(rt, bob.owner_id) == []


def test_an_address_another_owner_is_verifying_is_neither_claimed_nor_verified_in_any_case(rt, alice, bob):
    address = unique_email()
    service.add(rt, alice.owner_id, "email", address)
    code = last_code(rt)

    with pytest.raises(service.AddressTaken, match="is being verified by another owner; try again after"):
        service.add(rt, bob.owner_id, "email", address.upper())
    with pytest.raises(service.ContactNotFound):  # bob's reads by address find only bob's own contacts
        service.verify(rt, bob.owner_id, "email", address.title(), code)
    assert len(emails(rt.settings.data_dir)) == 1
    assert service.verify(rt, alice.owner_id, "email", address, code)["verified"] is True


def test_one_owner_never_holds_one_mailbox_twice_and_verifies_it_in_any_case(rt, alice, pool):
    import psycopg

    local = f"Ann.Lee-{unique_email().split('@')[0]}"
    written = f"{local}@example.com"
    first = service.add(rt, alice.owner_id, "email", written)
    with pytest.raises(service.TooSoon, match=f"a code was sent to the email address {local.lower()}@example.com less"):
        service.add(rt, alice.owner_id, "email", written.lower())  # the same contact: its code is a minute old

    contact = service.verify(rt, alice.owner_id, "email", f"{local.lower()}@EXAMPLE.com", last_code(rt))
    assert (contact["id"], contact["address"], contact["verified"]) == (first.contact["id"], written, True)
    again = service.add(rt, alice.owner_id, "email", written.upper())
    assert (again.code_sent, again.contact["id"], again.contact["address"]) == (False, first.contact["id"], written)
    assert [c["address"] for c in service.list_contacts(rt, alice.owner_id)] == [written]  # as first written
    assert len(emails(rt.settings.data_dir)) == 1 and emails(rt.settings.data_dir)[0]["To"] == written
    with pool.connection() as conn, pytest.raises(psycopg.errors.UniqueViolation):  # the schema refuses it too
        conn.execute("INSERT INTO owner_contacts (owner_id, kind, address) VALUES (%s, 'email', %s)",
                     (alice.owner_id, written.swapcase()))


def test_an_unverified_claim_of_another_owner_lapses_with_its_code(rt, alice, bob):
    address = unique_email()
    service.add(rt, bob.owner_id, "email", address)  # bob cannot read that mailbox
    with pytest.raises(service.AddressTaken, match="is being verified by another owner; try again after"):
        service.add(rt, alice.owner_id, "email", address)

    later = utcnow() + service.CODE_TTL + timedelta(seconds=1)
    added = service.add(rt, alice.owner_id, "email", address, now=later)
    assert added.code_sent and service.verify(rt, alice.owner_id, "email", address, last_code(rt), now=later)["verified"]
    assert service.list_contacts(rt, bob.owner_id) == []
    with pytest.raises(service.ContactNotFound):
        service.verify(rt, bob.owner_id, "email", address, "000000")


@pytest.mark.parametrize(("kind", "address", "message"), [
    ("email", "Owner <owner@example.com>", "is not a plain email address: give only the address"),
    ("email", "owner@example.com\r\nBcc: evil@example.com", "contains a control character"),
    ("email", "owner@localhost", "'localhost' is not a mail domain"),
    ("email", "owner.example.com", "is not an email address (name@domain"),
    ("email", "ówner@example.com", "has non-ASCII characters"),
    ("email", "a..b@example.com", "is not an email address"),
    ("sms", "5551234567", "is not a phone number in E.164 form"),
    ("sms", "+0123456789", "is not a phone number in E.164 form"),
    ("sms", "+1555", "is not a phone number in E.164 form"),
])
def test_a_bad_address_is_refused_with_why(rt, alice, kind, address, message):
    status, body, _ = call("POST", "/api/jarvis/contacts", {"kind": kind, "address": address}, token=token(alice))
    assert status == 422 and body["error"] == "validation_error" and message in body["message"]


def test_a_code_is_six_digits_and_the_kind_is_email_or_sms(rt, alice):
    tok = token(alice)
    status, body, _ = call("POST", "/api/jarvis/contacts/verify", {"kind": "email", "address": "a@example.com", "code": "12345"},
                           token=tok)
    assert status == 422 and body["message"].startswith("code: String should match pattern")
    status, body, _ = call("POST", "/api/jarvis/contacts", {"kind": "pager", "address": "1"}, token=tok)
    assert status == 422 and body["message"].startswith("kind: Input should be 'email' or 'sms'")


def test_another_owner_can_neither_see_nor_verify_nor_remove_my_contacts(rt, alice, bob):
    address = unique_email()
    added = service.add(rt, alice.owner_id, "email", address)
    code, contact_id = last_code(rt), added.contact["id"]
    bobs = token(bob)

    assert call("GET", "/api/jarvis/contacts", token=bobs)[1] == {"contacts": []}
    status, body, _ = call("POST", "/api/jarvis/contacts/verify", {"kind": "email", "address": address, "code": code}, token=bobs)
    assert status == 404 and body["message"].startswith(f"no email contact {address}")
    status, body, _ = call("DELETE", f"/api/jarvis/contacts/{contact_id}", token=bobs)
    assert (status, body["message"]) == (404, f"contact {contact_id} not found")

    assert service.verify(rt, alice.owner_id, "email", address, code)["verified"] is True  # untouched by bob's tries
    alices = token(alice)
    assert call("DELETE", f"/api/jarvis/contacts/{contact_id}", token=alices)[0] == 204
    assert call("GET", "/api/jarvis/contacts", token=alices)[1] == {"contacts": []}


def test_the_cli_adds_verifies_lists_and_removes_for_the_owner(rt, alice, capsys):
    who, address = ["--owner", alice.name], unique_email()
    assert main(["contacts", "add", "email", address, *who]) == 0
    out = capsys.readouterr().out
    assert f"a 6-digit code was sent to {address}" in out and "(the local notifier wrote it to " in out
    assert f"verify with: zerg contacts verify email {address} CODE" in out
    assert main(["contacts", "add", "sms", unique_number(), *who]) == 0
    capsys.readouterr()

    assert main(["contacts", "verify", "email", address, "000000" if last_code(rt) != "000000" else "000001", *who]) == 2
    assert "wrong code for the email address" in capsys.readouterr().err
    assert main(["contacts", "verify", "email", address, last_code(rt), *who]) == 0
    assert capsys.readouterr().out.startswith(f"verified: email {address}")

    assert main(["contacts", "list", *who]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(r[1], r[3]) for r in rows] == [("email", "verified"), ("sms", "unverified")]
    assert main(["contacts", "rm", rows[1][0], *who]) == 0
    assert main(["contacts", "rm", rows[1][0], *who]) == 1
    assert capsys.readouterr().err.endswith(f"zerg: contact {rows[1][0]} not found\n")
    assert main(["contacts", "add", "email", "not an address", *who]) == 2
    assert "zerg: error: " in capsys.readouterr().err
