from django.contrib import admin

from cudaweb.accounts.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the audit log is only ever appended to (the /audit/ page filters and exports it)."""

    list_display = ("when", "actor_name", "action", "object_type", "object_repr", "client_address")
    list_filter = ("action", "object_type")
    search_fields = ("actor_name", "object_repr", "object_id")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
