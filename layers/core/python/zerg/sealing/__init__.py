"""Secrets sealed per owner: the port and its two backends (:func:`zerg.wiring.make_sealer` picks one).

``ZERG_KMS_KEY_ID`` set: AWS KMS. Unset: AES-GCM under ``ZERG_DATA_DIR/sealing.key`` — refused
on Lambda, where the data dir does not outlive the container.
"""

from __future__ import annotations

from zerg.sealing.port import Sealer, SealError

__all__ = ["LOCAL_KEY_FILE", "Sealer", "SealError"]

LOCAL_KEY_FILE = "sealing.key"
