from django.contrib import admin

from cudaweb.accounts.audit import AuditedAdmin
from cudaweb.drift.catalog import METRICS
from cudaweb.drift.models import DriftThreshold, PeerBand


@admin.register(DriftThreshold)
class DriftThresholdAdmin(AuditedAdmin, admin.ModelAdmin):
    """Per-metric drift thresholds (percent worse than the baseline); unset metrics use the catalogue default."""

    audit_name = "threshold"
    list_display = ("metric", "threshold_pct", "default_pct")

    @admin.display(description="default %")
    def default_pct(self, obj):
        metric = METRICS.get(obj.metric)
        return metric.threshold_pct if metric else "unknown metric"


@admin.register(PeerBand)
class PeerBandAdmin(admin.ModelAdmin):
    list_display = ("gpu_model", "metric", "median", "low", "high", "count", "updated")
    list_filter = ("gpu_model",)

    def has_add_permission(self, request):
        return False  # computed from the fleet's runs

    def has_change_permission(self, request, obj=None):
        return False
