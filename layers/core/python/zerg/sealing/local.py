"""Local sealing: AES-256-GCM under one random key in ``ZERG_DATA_DIR/sealing.key`` (mode 0600).

The owner context is the GCM associated data, so a blob sealed for one owner fails
authentication when opened for another. The key file is created once (exclusively, never
overwritten) and refused when anyone but its owner may read it: a key others can read seals nothing.
Losing the file loses every sealed secret (the hosts must be added again); back it up with the data dir.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import time
from pathlib import Path

from zerg.sealing.port import LOCAL_TAG, Sealer, SealError

KEY_BYTES = 32
NONCE_BYTES = 12


def _aad(context: dict[str, str]) -> bytes:
    return json.dumps(context, sort_keys=True, separators=(",", ":")).encode()


class LocalSealer(Sealer):
    tag = LOCAL_TAG

    def __init__(self, key_file: Path) -> None:
        self.key_file = Path(key_file)
        self._key: bytes | None = None

    def __repr__(self) -> str:
        return f"LocalSealer({self.key_file})"

    def _aes(self):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if self._key is None:
            self._key = self._load_or_create()
        return AESGCM(self._key)

    def _load_or_create(self) -> bytes:
        path = self.key_file
        if not path.parent.exists():
            path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)  # two cold starts may race here
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:  # written in one call; a reader racing the creation sees a short file and retries below
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(KEY_BYTES))
        for _ in range(50):
            info = path.stat()
            if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise SealError(f"{path} may be read by others (mode {stat.S_IMODE(info.st_mode):o}); "
                                "run: chmod 600 " + str(path))
            key = path.read_bytes()
            if len(key) == KEY_BYTES:
                return key
            if len(key) > KEY_BYTES:
                break
            time.sleep(0.01)
        raise SealError(f"{path} is not a {KEY_BYTES}-byte sealing key")

    def _seal(self, context: dict[str, str], plaintext: bytes) -> bytes:
        nonce = secrets.token_bytes(NONCE_BYTES)
        return nonce + self._aes().encrypt(nonce, plaintext, _aad(context))

    def _open(self, context: dict[str, str], blob: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        aes = self._aes()
        if len(blob) <= NONCE_BYTES:
            raise SealError("sealed secret is truncated")
        try:
            return aes.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], _aad(context))
        except InvalidTag:
            raise SealError("cannot open the sealed secret: not sealed for this owner, "
                            "tampered with, or sealed under another key file") from None
