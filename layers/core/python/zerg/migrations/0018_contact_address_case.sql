-- 0018 (issue 25): a contact's address is compared in any case. `ALICE@example.com` is the mailbox of
-- `alice@example.com`: the domain is case-insensitive by definition and the local part is at every
-- mainstream provider. The address stays as the owner wrote it (mail goes there, the owner sees it);
-- `canonical_address` is what is compared and unique, derived here by the database so that no writer
-- can let it drift. lower() under the "C" collation changes A-Z only, whatever the database's locale
-- (a Turkish one would turn I into a dotless i), exactly as zerg.notify.contacts.canonical_address.
ALTER TABLE owner_contacts ADD COLUMN canonical_address text GENERATED ALWAYS AS (lower(address COLLATE "C")) STORED;

-- Rows that the new rule makes one address: keep one per (kind, canonical_address) and remove the
-- others, each reported in one line (zerg.migrate logs it; `zerg db migrate` prints it). The one kept
-- is the first verified, else the first added, else the lowest id: a verified contact is never
-- removed for an unverified one. Within one owner the removed row's notifications move to the one
-- kept (the same mailbox). Across owners only one may hold a mailbox, as one sender must decide one
-- owner: the owner whose row is removed must add another address (or prove this one again once the
-- other owner removes it). Phone numbers hold no letters: only email rows can meet here.
DO $$
DECLARE
    r record;
    how text;
    kept_how text;
BEGIN
    FOR r IN
        WITH ranked AS (
            SELECT id, canonical_address, first_value(id) OVER same AS kept_id, row_number() OVER same AS place
            FROM owner_contacts
            WINDOW same AS (PARTITION BY kind, canonical_address
                            ORDER BY verified_at IS NULL, verified_at, created_at, id)
        )
        SELECT d.id, d.owner_id, d.kind, d.address, d.verified_at,
               k.id AS kept_id, k.owner_id AS kept_owner_id, k.address AS kept_address,
               k.verified_at AS kept_verified_at
        FROM ranked
        JOIN owner_contacts d ON d.id = ranked.id
        JOIN owner_contacts k ON k.id = ranked.kept_id
        WHERE ranked.place > 1
        ORDER BY d.kind, ranked.canonical_address, ranked.place
    LOOP
        IF r.owner_id = r.kept_owner_id THEN
            UPDATE notifications SET contact_id = r.kept_id WHERE contact_id = r.id;
        END IF;
        DELETE FROM owner_contacts WHERE id = r.id;
        how := COALESCE('verified ' || to_char(r.verified_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"'),
                        'unverified');
        kept_how := COALESCE('verified ' || to_char(r.kept_verified_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"'),
                             'unverified');
        RAISE INFO '%', format(
            'owner_contacts: removed %s contact #%s %s (owner %s, %s): the same address as contact #%s %s (%s, %s), '
            'which is kept%s',
            r.kind, r.id, r.address, r.owner_id, how, r.kept_id, r.kept_address,
            CASE WHEN r.owner_id = r.kept_owner_id THEN 'the same owner' ELSE 'owner ' || r.kept_owner_id END,
            kept_how,
            CASE WHEN r.owner_id = r.kept_owner_id THEN ' (its notifications moved to it)'
                 WHEN r.verified_at IS NOT NULL THEN '; owner ' || r.owner_id || ' no longer receives mail there'
                 ELSE '' END);
    END LOOP;
END
$$;

ALTER TABLE owner_contacts DROP CONSTRAINT owner_contacts_kind_address_key;
ALTER TABLE owner_contacts ADD CONSTRAINT owner_contacts_kind_canonical_address_key UNIQUE (kind, canonical_address);
