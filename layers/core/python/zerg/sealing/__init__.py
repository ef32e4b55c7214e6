"""Secrets sealed per owner: the port, its two backends and the factory that picks one.

``ZERG_KMS_KEY_ID`` set: AWS KMS. Unset: AES-GCM under ``ZERG_DATA_DIR/sealing.key`` — refused
on Lambda, where the data dir does not outlive the container.
"""

from __future__ import annotations

from zerg import hosting
from zerg.config import Settings, get_settings
from zerg.sealing.port import Sealer, SealError

__all__ = ["Sealer", "SealError", "get_sealer"]

LOCAL_KEY_FILE = "sealing.key"


def get_sealer(settings: Settings | None = None) -> Sealer:
    settings = settings or get_settings()
    if settings.kms_key_id:
        from zerg.sealing.kms import KMSSealer

        return KMSSealer(settings.kms_key_id)
    if hosting.may_be_lambda(settings):
        raise SealError("ZERG_KMS_KEY_ID must be set on Lambda: a local key file would not outlive the container")
    from zerg.sealing.local import LocalSealer

    return LocalSealer(settings.data_dir / LOCAL_KEY_FILE)
