-- Web Push (issue 16, seed 4.4 "Push notification"): the owner's browser subscriptions, the
-- deployment's VAPID key pair, and 'push' as a notification channel beside email and SMS.

-- One row per browser subscription (the Push API's PushSubscription). The endpoint is a URL Zerg
-- POSTs to (checked against the egress policy when stored and again when sent); the browser's keys
-- encrypt the payload for it and are never returned nor exported (their names say secret).
CREATE TABLE push_subscriptions (
    id                 bigserial PRIMARY KEY,
    owner_id           bigint NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    device_id          bigint REFERENCES devices(id) ON DELETE SET NULL,
    endpoint           text NOT NULL CHECK (length(endpoint) BETWEEN 9 AND 2000),
    p256dh_secret      text NOT NULL CHECK (length(p256dh_secret) BETWEEN 80 AND 100),  -- base64url, 65 bytes
    auth_secret        text NOT NULL CHECK (length(auth_secret) BETWEEN 20 AND 30),     -- base64url, 16 bytes
    created_at         timestamptz NOT NULL DEFAULT now(),
    last_sent_at       timestamptz,
    failures           integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    UNIQUE (owner_id, endpoint)
);

-- The deployment's VAPID key pair: one row, made once (INSERT ... ON CONFLICT DO NOTHING, then read
-- back: two cold starts racing both end with the same key). The private key only sealed.
CREATE TABLE push_vapid_keys (
    id                   smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    public_key           text NOT NULL,   -- base64url, the uncompressed P-256 point (65 bytes)
    private_key_sealed   bytea NOT NULL,  -- the PKCS#8 DER, sealed (zerg.sealing, the deployment context)
    created_at           timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE notifications DROP CONSTRAINT notifications_channel_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_channel_check CHECK (channel IN ('email', 'sms', 'push'));
-- A test push (POST /api/jarvis/push/test) is recorded like any other notification.
ALTER TABLE notifications DROP CONSTRAINT notifications_purpose_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_purpose_check
    CHECK (purpose IN ('alert', 'escalation', 'digest', 'reminder', 'verification', 'connector', 'budget', 'answer',
                       'test'));
ALTER TABLE notification_usage DROP CONSTRAINT notification_usage_channel_check;
ALTER TABLE notification_usage ADD CONSTRAINT notification_usage_channel_check
    CHECK (channel IN ('email', 'sms', 'push'));

-- The policy: which severities go to push (when the owner has a subscription), and its daily limit.
ALTER TABLE notification_policies ADD COLUMN push text[] NOT NULL DEFAULT '{warning,critical}'
    CHECK (push <@ ARRAY['info', 'warning', 'critical']::text[]);
ALTER TABLE notification_policies ADD COLUMN daily_push_limit integer NOT NULL DEFAULT 50
    CHECK (daily_push_limit BETWEEN 0 AND 10000);
