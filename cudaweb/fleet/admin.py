from django.contrib import admin

from cudaweb.fleet.models import AcceptanceRecord


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
