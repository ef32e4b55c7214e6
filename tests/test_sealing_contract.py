"""The sealing port: one contract, run against the local AES-GCM key file and AWS KMS (moto).

moto 5.2.5 seals with AES-GCM and uses the serialised encryption context as associated data, so
it enforces the context as KMS does: a decrypt naming another owner fails with
InvalidCiphertextException (checked directly on the client below, not only through our port).
"""

from __future__ import annotations

import os
import stat

import boto3
import pytest
from moto import mock_aws

from zerg.config import load_settings
from zerg.sealing import SealError
from zerg.sealing.kms import KMSSealer
from zerg.sealing.local import LocalSealer
from zerg.wiring import make_sealer

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nnot-really-a-key-but-secret-bytes\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.fixture
def kms():
    with mock_aws():
        client = boto3.client("kms", region_name="us-east-1")
        key_id = client.create_key(Description="zerg test host keys")["KeyMetadata"]["KeyId"]
        yield client, key_id


@pytest.fixture(params=["local", "kms"])
def sealer(request, tmp_path):
    if request.param == "local":
        yield LocalSealer(tmp_path / "data" / "sealing.key")
    else:
        client, key_id = request.getfixturevalue("kms")
        yield KMSSealer(key_id, client=client)


def test_a_sealed_secret_opens_for_its_owner_and_for_no_other(sealer):
    sealed = sealer.seal(7, SECRET)
    assert sealer.open(7, sealed) == SECRET
    for other in (8, 70, 1):
        with pytest.raises(SealError, match="not sealed for this owner"):
            sealer.open(other, sealed)


def test_the_sealed_blob_holds_no_plaintext_and_two_seals_differ(sealer):
    first, second = sealer.seal(7, SECRET), sealer.seal(7, SECRET)
    assert first != second  # a fresh nonce / IV each time
    for blob in (first, second):
        assert b"not-really-a-key" not in blob and b"PRIVATE KEY" not in blob


def test_a_tampered_or_truncated_blob_is_refused_without_echoing_it(sealer):
    sealed = bytearray(sealer.seal(3, SECRET))
    sealed[-1] ^= 0x01
    with pytest.raises(SealError) as err:
        sealer.open(3, bytes(sealed))
    assert "PRIVATE" not in str(err.value)
    with pytest.raises(SealError):
        sealer.open(3, bytes(sealed[:4]))


def test_a_blob_of_the_other_backend_or_no_backend_is_named_as_such(sealer, tmp_path):
    other = b"zk1" + b"x" * 40 if isinstance(sealer, LocalSealer) else b"zl1" + b"x" * 40
    with pytest.raises(SealError, match="sealed with .* but this deployment uses"):
        sealer.open(1, other)
    with pytest.raises(SealError, match="not a sealed secret"):
        sealer.open(1, SECRET)


@pytest.mark.parametrize("owner_id", [0, -1, None, "7", True])
def test_sealing_needs_a_positive_owner_id(sealer, owner_id):
    with pytest.raises(SealError, match="positive owner id"):
        sealer.seal(owner_id, SECRET)


# --- backend specifics ------------------------------------------------------------------------

def test_the_local_key_file_is_created_once_private_and_shared_by_every_sealer(tmp_path):
    path = tmp_path / "data" / "sealing.key"
    sealed = LocalSealer(path).seal(5, SECRET)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(path.read_bytes()) == 32
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    key = path.read_bytes()
    assert LocalSealer(path).open(5, sealed) == SECRET  # another process reads the same key
    assert path.read_bytes() == key  # never overwritten


def test_a_local_key_file_others_may_read_is_refused(tmp_path):
    path = tmp_path / "sealing.key"
    LocalSealer(path).seal(5, SECRET)
    os.chmod(path, 0o644)
    with pytest.raises(SealError, match="may be read by others .* chmod 600"):
        LocalSealer(path).seal(5, SECRET)


def test_a_blob_sealed_under_another_local_key_file_is_refused(tmp_path):
    sealed = LocalSealer(tmp_path / "a.key").seal(5, SECRET)
    with pytest.raises(SealError, match="not sealed for this owner"):
        LocalSealer(tmp_path / "b.key").open(5, sealed)


def test_kms_binds_the_owner_as_the_encryption_context_and_moto_enforces_it(kms):
    client, key_id = kms
    blob = KMSSealer(key_id, client=client).seal(7, SECRET)[3:]
    ok = client.decrypt(CiphertextBlob=blob, EncryptionContext={"zerg_owner_id": "7"})
    assert ok["Plaintext"] == SECRET
    for context in ({}, {"zerg_owner_id": "8"}, {"zerg_owner_id": "7", "extra": "x"}):
        with pytest.raises(client.exceptions.InvalidCiphertextException):
            client.decrypt(CiphertextBlob=blob, EncryptionContext=context)


def test_kms_failures_name_the_error_code_not_the_request(kms):
    client, _ = kms
    with pytest.raises(SealError) as err:
        KMSSealer("alias/does-not-exist", client=client).seal(7, SECRET)
    assert "NotFoundException" in str(err.value) and "PRIVATE" not in str(err.value)
    with pytest.raises(SealError, match="at most 4096 bytes"):
        KMSSealer("k", client=client).seal(7, b"x" * 5000)


def test_the_factory_picks_kms_when_a_key_is_configured_and_never_a_local_file_on_lambda(tmp_path):
    assert isinstance(make_sealer(load_settings({"ZERG_DATA_DIR": str(tmp_path)})), LocalSealer)
    kms_sealer = make_sealer(load_settings({"ZERG_DATA_DIR": str(tmp_path), "ZERG_KMS_KEY_ID": "alias/zerg/test/host-keys"}))
    assert isinstance(kms_sealer, KMSSealer) and kms_sealer.key_id == "alias/zerg/test/host-keys"
    with pytest.raises(SealError, match="ZERG_KMS_KEY_ID must be set on Lambda"):
        make_sealer(load_settings({"ZERG_DATA_DIR": str(tmp_path), "AWS_LAMBDA_FUNCTION_NAME": "zerg-test-worker"}))
