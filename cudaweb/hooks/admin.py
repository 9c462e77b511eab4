from django.contrib import admin

from cudaweb.hooks.models import HookDelivery


@admin.register(HookDelivery)
class HookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("created", "kind", "event", "node", "status", "attempts", "last_error")
    list_filter = ("status", "kind", "event")
    readonly_fields = [f.name for f in HookDelivery._meta.fields]
