"""Encryption at rest (AES-256-GCM) for the files specrag writes besides the vector store.

``DataFiles(settings)`` is how specrag code writes caches, audit samples and exports:
``write_bytes``/``read_bytes`` (whole files, written to a temporary file *already
encrypted* and renamed into place, so no plaintext copy ever exists on disk, and a
crash leaves the old file or the new one), ``append_line``/``read_lines`` (one
encrypted record per line, for logs), and ``seal``/``unseal`` (one encrypted string,
for a column in SQLite). With ``security.encrypt`` off they write plaintext and read
both kinds.

The key is 32 random bytes, base64 or hex, from the env var named by
``security.key_env`` or the file ``security.key_file`` (which must not be readable by
group or others). With encryption on and no key, every call fails with a message
saying how to make one (``specrag users keygen``). Files start with ``MAGIC``; each has
a fresh 96-bit nonce; the GCM tag detects tampering and wrong keys.

Deliberately not here: the Chroma store (chunk text and embeddings stay in plaintext
there: put it on an encrypted volume, or run a Chroma server that encrypts), key
rotation, and uploads held by the web server (see ``uploads``).
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from pathlib import Path

from specrag.settings import Settings
from specrag.types import SpecragError

MAGIC = b"SPECRAG-AESGCM1\n"
SEALED = "enc:v1:"  # prefix of an encrypted string (``seal``)
_NONCE = 12


class EncryptionError(SpecragError):
    """No key, a bad key, or data that does not decrypt with it."""


def generate_key() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def parse_key(text: str, where: str) -> bytes:
    text = text.strip()
    try:
        key = bytes.fromhex(text) if len(text) == 64 else base64.urlsafe_b64decode(
            text.replace("+", "-").replace("/", "_") + "=" * (-len(text) % 4))
    except (ValueError, binascii.Error):
        key = b""
    if len(key) != 32:
        raise EncryptionError(f"{where}: the key must be 32 bytes, base64 or hex "
                              "(make one with 'specrag users keygen')")
    return key


def load_key(settings: Settings, env: dict | None = None) -> bytes | None:
    """The key when ``security.encrypt`` is on, else None; a clear error when it is missing."""
    sec = settings.security
    if not sec.encrypt:
        return None
    env = os.environ if env is None else env
    if env.get(sec.key_env):
        return parse_key(env[sec.key_env], f"${sec.key_env}")
    if sec.key_file:
        path = Path(os.path.expanduser(sec.key_file))
        if not path.is_file():
            raise EncryptionError(f"key file {path} not found (security.key_file)")
        if os.name == "posix" and path.stat().st_mode & 0o077:
            raise EncryptionError(f"key file {path} is readable by other users: chmod 600 it")
        return parse_key(path.read_text(), str(path))
    raise EncryptionError(f"encryption at rest is on (security.encrypt) but there is no key: "
                          f"set ${sec.key_env} or security.key_file to a 32-byte base64 key "
                          "(make one with 'specrag users keygen')")


class Cipher:
    def __init__(self, key: bytes):
        self.key = key

    def encrypt(self, data: bytes) -> bytes:
        aes = _aesgcm(self.key)
        nonce = os.urandom(_NONCE)
        return MAGIC + nonce + aes.encrypt(nonce, data, MAGIC)

    def decrypt(self, blob: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        if not blob.startswith(MAGIC):
            raise EncryptionError("not encrypted by specrag")
        nonce = blob[len(MAGIC):len(MAGIC) + _NONCE]
        try:
            return _aesgcm(self.key).decrypt(nonce, blob[len(MAGIC) + _NONCE:], MAGIC)
        except InvalidTag:
            raise EncryptionError("cannot decrypt: wrong key or the data was altered") from None


def _aesgcm(key: bytes):
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError("encryption at rest needs: pip install cryptography") from err
    return AESGCM(key)


class DataFiles:
    def __init__(self, settings: Settings):
        self.settings = settings
        self._cipher: Cipher | None = None

    @property
    def cipher(self) -> Cipher | None:
        if self._cipher is None and self.settings.security.encrypt:
            self._cipher = Cipher(load_key(self.settings))
        return self._cipher

    # -- whole files --------------------------------------------------------------
    def write_bytes(self, path: str | os.PathLike, data: bytes) -> Path:
        path = Path(path)
        payload = self.cipher.encrypt(data) if self.cipher else data
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def read_bytes(self, path: str | os.PathLike) -> bytes:
        blob = Path(path).read_bytes()
        return self._open(blob, str(path)) if blob.startswith(MAGIC) else blob

    def write_text(self, path: str | os.PathLike, text: str) -> Path:
        return self.write_bytes(path, text.encode("utf-8"))

    def read_text(self, path: str | os.PathLike) -> str:
        return self.read_bytes(path).decode("utf-8")

    # -- records and fields -------------------------------------------------------
    def seal(self, text: str) -> str:
        """An encrypted, printable form of ``text`` (``text`` itself with encryption off)."""
        if not self.cipher:
            return text
        return SEALED + base64.b64encode(self.cipher.encrypt(text.encode("utf-8"))).decode()

    def unseal(self, value: str) -> str:
        if not isinstance(value, str) or not value.startswith(SEALED):
            return value
        return self._open(base64.b64decode(value[len(SEALED):]), "sealed value").decode("utf-8")

    def append_line(self, path: str | os.PathLike, text: str) -> None:
        """Append one record (no newlines in plaintext mode) as one line."""
        if "\n" in text and not self.cipher:
            raise ValueError("a record must be one line (encode it as JSON)")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(self.seal(text) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def read_lines(self, path: str | os.PathLike) -> list[str]:
        """Records in order; a torn last line (a crash mid-append) is skipped."""
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        out = []
        for i, line in enumerate(lines):
            try:
                out.append(self.unseal(line))
            except (EncryptionError, ValueError, binascii.Error):
                if i < len(lines) - 1:  # only the last line can be torn; others mean a bad key
                    raise
        return out

    def _open(self, blob: bytes, where: str) -> bytes:
        cipher = self.cipher
        if cipher is None:  # encrypted data but encryption switched off: still need the key
            key = load_key(self.settings.with_values(**{"security.encrypt": True}))
            cipher = Cipher(key)
        try:
            return cipher.decrypt(blob)
        except EncryptionError as err:
            raise EncryptionError(f"{where}: {err}") from None
