from django.contrib import admin

from cudaweb.fleet.models import AcceptanceRecord, HostKey, Node, SSHCredential


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("name", "address", "port", "transport", "status", "gpu_model", "drifted")
    list_filter = ("status", "gpu_model", "drifted")


@admin.register(SSHCredential)
class SSHCredentialAdmin(admin.ModelAdmin):
    list_display = ("name", "key_path", "created")
    exclude = ("private_key_encrypted",)


@admin.register(HostKey)
class HostKeyAdmin(admin.ModelAdmin):
    list_display = ("node", "key_type", "fingerprint_sha256", "accepted_by", "accepted_at")


@admin.register(AcceptanceRecord)
class AcceptanceRecordAdmin(admin.ModelAdmin):
    """Read-only: a decision and its evidence are never edited or deleted."""

    list_display = ("node", "decision", "decided_by", "decided_at", "digest")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
