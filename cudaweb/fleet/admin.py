from django.contrib import admin

from cudaweb.fleet.models import HostKey, Node, SSHCredential


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("name", "address", "port", "transport", "status")


@admin.register(SSHCredential)
class SSHCredentialAdmin(admin.ModelAdmin):
    list_display = ("name", "key_path", "created")
    exclude = ("private_key_encrypted",)


@admin.register(HostKey)
class HostKeyAdmin(admin.ModelAdmin):
    list_display = ("node", "key_type", "fingerprint_sha256", "accepted_by", "accepted_at")
