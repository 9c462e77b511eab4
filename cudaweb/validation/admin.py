from django.contrib import admin

from cudaweb.validation.models import CheckResult, ValidationRun


@admin.register(ValidationRun)
class ValidationRunAdmin(admin.ModelAdmin):
    list_display = ("node", "mode", "status", "created", "finished")
    list_filter = ("status", "mode")


@admin.register(CheckResult)
class CheckResultAdmin(admin.ModelAdmin):
    list_display = ("run", "check_id", "status")
