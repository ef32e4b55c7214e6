"""The sealing port: secrets at rest, each sealed for one owner.

A connector's credential (an SSH private key today) is stored only sealed. Sealing binds the
ciphertext to the owner it was sealed for: opening it for any other owner id fails, so a row moved,
copied or read across owners in the database cannot be used by another owner's worker.

Invariants:
- ``open(owner_id, seal(owner_id, data)) == data``; ``open`` with another owner id, a tampered
  blob, or a blob sealed by the other backend raises :class:`SealError`.
- A sealed blob starts with its backend's tag (``SEAL_TAGS``), so a deployment that changed backend
  says so instead of reporting corruption.
- A deployment's own secret (the Web Push VAPID key) is sealed with :meth:`Sealer.seal_deployment`,
  bound to :data:`DEPLOYMENT_CONTEXT` (the same key, a value no owner id can take): it never opens
  as an owner's secret, nor an owner's as it.
- Neither the plaintext nor key material appears in a sealed blob's tag, in an exception message,
  or in a log line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

LOCAL_TAG = b"zl1"  # AES-256-GCM under the local key file
KMS_TAG = b"zk1"  # an AWS KMS ciphertext blob
SEAL_TAGS = {LOCAL_TAG: "the local key file", KMS_TAG: "AWS KMS"}


# The context of the deployment's own secrets: the owner key the infra's IAM conditions require,
# with a value that is not a number, so it is never an owner's.
DEPLOYMENT_CONTEXT = {"zerg_owner_id": "deployment"}


class SealError(Exception):
    """A sealed secret cannot be opened (wrong owner, tampered, other backend, key unavailable)."""


def owner_context(owner_id: int) -> dict[str, str]:
    """What a sealed secret is bound to: the KMS encryption context, and (as bytes) the AES-GCM
    associated data. One key, ``zerg_owner_id``, which the infra's IAM conditions require."""
    if not isinstance(owner_id, int) or isinstance(owner_id, bool) or owner_id <= 0:
        raise SealError(f"sealing needs a positive owner id, got {owner_id!r}")
    return {"zerg_owner_id": str(owner_id)}


class Sealer(ABC):
    tag: bytes

    def seal(self, owner_id: int, plaintext: bytes) -> bytes:
        """``plaintext`` sealed for ``owner_id`` (tag + backend ciphertext)."""
        return self.tag + self._seal(owner_context(owner_id), plaintext)

    def open(self, owner_id: int, sealed: bytes) -> bytes:
        """The plaintext, if ``sealed`` was sealed by this backend for ``owner_id``."""
        context = owner_context(owner_id)
        return self._open(context, self._untag(sealed))

    def seal_deployment(self, plaintext: bytes) -> bytes:
        """``plaintext`` sealed as the deployment's own secret (no owner's)."""
        return self.tag + self._seal(dict(DEPLOYMENT_CONTEXT), plaintext)

    def open_deployment(self, sealed: bytes) -> bytes:
        """The plaintext of a secret sealed by :meth:`seal_deployment`."""
        return self._open(dict(DEPLOYMENT_CONTEXT), self._untag(sealed))

    def _untag(self, sealed: bytes) -> bytes:
        sealed = bytes(sealed)
        if not sealed.startswith(self.tag):
            other = next((name for tag, name in SEAL_TAGS.items() if sealed.startswith(tag)), None)
            raise SealError(f"sealed with {other}, but this deployment uses {SEAL_TAGS[self.tag]}" if other
                            else "not a sealed secret (unknown format)")
        return sealed[len(self.tag):]

    @abstractmethod
    def _seal(self, context: dict[str, str], plaintext: bytes) -> bytes: ...

    @abstractmethod
    def _open(self, context: dict[str, str], blob: bytes) -> bytes: ...
