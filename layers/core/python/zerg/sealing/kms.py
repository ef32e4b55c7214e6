"""AWS sealing: KMS ``Encrypt``/``Decrypt`` with the owner context as the encryption context.

KMS authenticates the encryption context: a ciphertext sealed for owner 7 decrypts only with
``{"zerg_owner_id": "7"}``. The infra grants ``kms:Encrypt`` to the ingress function and
``kms:Decrypt`` to the worker, each only for requests that carry a ``zerg_owner_id`` context, so
neither role can use the key without naming an owner. Secrets are small (an SSH key is < 4 KiB,
KMS's direct-encryption limit), so no envelope encryption is needed.
"""

from __future__ import annotations

from typing import Any

from zerg.sealing.port import KMS_TAG, Sealer, SealError

MAX_PLAINTEXT = 4096  # KMS Encrypt's limit


class KMSSealer(Sealer):
    tag = KMS_TAG

    def __init__(self, key_id: str, *, client: Any = None) -> None:
        self.key_id = key_id
        self._client = client

    def __repr__(self) -> str:
        return f"KMSSealer({self.key_id})"

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3  # where used: the cold start of functions that never seal stays small

            self._client = boto3.client("kms")
        return self._client

    @staticmethod
    def _code(exc: Exception) -> str:
        return getattr(exc, "response", {}).get("Error", {}).get("Code", "") or type(exc).__name__

    def _seal(self, context: dict[str, str], plaintext: bytes) -> bytes:
        if len(plaintext) > MAX_PLAINTEXT:
            raise SealError(f"a sealed secret is at most {MAX_PLAINTEXT} bytes (got {len(plaintext)})")
        try:
            return self.client.encrypt(KeyId=self.key_id, Plaintext=plaintext,
                                       EncryptionContext=context)["CiphertextBlob"]
        except Exception as exc:  # botocore errors: the code only, never the request
            raise SealError(f"KMS Encrypt with {self.key_id} failed: {self._code(exc)}") from None

    def _open(self, context: dict[str, str], blob: bytes) -> bytes:
        try:
            return self.client.decrypt(KeyId=self.key_id, CiphertextBlob=blob,
                                       EncryptionContext=context)["Plaintext"]
        except Exception as exc:
            code = self._code(exc)
            if code == "InvalidCiphertextException":
                raise SealError("cannot open the sealed secret: not sealed for this owner, "
                                "tampered with, or sealed under another KMS key") from None
            raise SealError(f"KMS Decrypt with {self.key_id} failed: {code}") from None
