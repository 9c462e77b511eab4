"""Credential keys as a MultiFernet (newest first) and `manage.py rotate_credential_key`."""

from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command

from cudaweb.nodes import crypto
from cudaweb.nodes.models import SSHCredential

pytestmark = pytest.mark.django_db
KEY_TEXT = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key, a secret all the same\n-----END OPENSSH PRIVATE KEY-----\n"


def test_rotation_keeps_old_ciphertexts_readable_then_moves_them_to_the_newest_key(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CREDENTIAL_KEYS = [old]
    credential = SSHCredential(name="rack key")
    credential.set_private_key(KEY_TEXT)
    credential.save()
    before = credential.private_key_encrypted
    assert Fernet(old.encode()).decrypt(before.encode()).decode() == KEY_TEXT

    settings.CREDENTIAL_KEYS = [new, old]  # the new key first; the old one still opens what it encrypted
    assert SSHCredential.objects.get().private_key_text() == KEY_TEXT
    out = StringIO()
    call_command("rotate_credential_key", stdout=out)
    assert "1 stored keys re-encrypted" in out.getvalue()

    after = SSHCredential.objects.get().private_key_encrypted
    assert after != before and Fernet(new.encode()).decrypt(after.encode()).decode() == KEY_TEXT
    settings.CREDENTIAL_KEYS = [new]  # the old key dropped: everything still opens
    assert SSHCredential.objects.get().private_key_text() == KEY_TEXT


def test_the_single_key_setting_still_works(settings):
    key = Fernet.generate_key().decode()
    settings.CREDENTIAL_KEYS = [key]  # what CUDAWEB_CREDENTIAL_KEY alone becomes
    assert crypto.decrypt(crypto.encrypt("secret")) == "secret"
    assert Fernet(key.encode()).decrypt(crypto.encrypt("secret").encode()) == b"secret"


def test_a_key_no_configured_key_opens_stops_the_rotation_and_changes_nothing(settings):
    first, stranger = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CREDENTIAL_KEYS = [first]
    kept = SSHCredential(name="a")
    kept.set_private_key(KEY_TEXT)
    kept.save()
    settings.CREDENTIAL_KEYS = [stranger]
    orphan = SSHCredential(name="b")
    orphan.set_private_key(KEY_TEXT)
    orphan.save()
    settings.CREDENTIAL_KEYS = [Fernet.generate_key().decode(), first]
    with pytest.raises(CommandError, match="nothing was changed"):
        call_command("rotate_credential_key", stdout=StringIO())
    assert SSHCredential.objects.get(name="a").private_key_encrypted == kept.private_key_encrypted
