"""Encryption at rest for stored SSH private keys: a MultiFernet over CUDAWEB_CREDENTIAL_KEYS (newest first; the
single CUDAWEB_CREDENTIAL_KEY as before). The newest key encrypts; any of them decrypts."""

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def _fernet():
    keys = settings.CREDENTIAL_KEYS
    if not keys:
        raise ImproperlyConfigured("CUDAWEB_CREDENTIAL_KEY(S) is not set: stored SSH keys cannot be encrypted")
    fernets = []
    for position, key in enumerate(keys, 1):
        try:
            fernets.append(Fernet(key.encode()))
        except ValueError as exc:
            raise ImproperlyConfigured("credential key %d of %d is not a Fernet key: %s" % (position, len(keys), exc))
    return MultiFernet(fernets)


def encrypt(text):
    return _fernet().encrypt(text.encode()).decode()


def decrypt(token):
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured("a stored SSH key cannot be decrypted with any configured key: "
                                   "CUDAWEB_CREDENTIAL_KEY(S) changed?")


def rotate(token):
    """`token` re-encrypted with the newest key (raises like decrypt when no key opens it)."""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured("a stored SSH key cannot be decrypted with any configured key")
