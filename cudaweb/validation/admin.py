from django.contrib import admin

from cudaweb.validation.models import CheckResult, ValidationRun


class ReadOnly(admin.ModelAdmin):
    """Runs and their checks are evidence (an acceptance rests on them): the admin shows them, never edits them."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ValidationRun)
class ValidationRunAdmin(ReadOnly):
    list_display = ("node", "mode", "status", "created", "finished")
    list_filter = ("status", "mode")


@admin.register(CheckResult)
class CheckResultAdmin(ReadOnly):
    list_display = ("run", "check_id", "status")
