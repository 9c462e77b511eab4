"""Encryption at rest for stored SSH private keys (Fernet, key from CUDAWEB_CREDENTIAL_KEY)."""

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def _fernet():
    if not settings.CREDENTIAL_KEY:
        raise ImproperlyConfigured("CUDAWEB_CREDENTIAL_KEY is not set: stored SSH keys cannot be encrypted")
    try:
        return Fernet(settings.CREDENTIAL_KEY.encode())
    except ValueError as exc:
        raise ImproperlyConfigured("CUDAWEB_CREDENTIAL_KEY is not a Fernet key: %s" % exc)


def encrypt(text):
    return _fernet().encrypt(text.encode()).decode()


def decrypt(token):
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured("a stored SSH key cannot be decrypted: CUDAWEB_CREDENTIAL_KEY changed?")
