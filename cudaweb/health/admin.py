from django import forms
from django.contrib import admin

from cudaweb.accounts.audit import AuditedAdmin
from cudaweb.health.models import HealthEvent, LoopPolicy
from cudaweb.health.policy import ladder_check


class LoopPolicyForm(forms.ModelForm):
    class Meta:
        model = LoopPolicy
        fields = "__all__"

    def clean_ladder(self):
        try:
            return list(ladder_check(self.cleaned_data["ladder"]))
        except ValueError as exc:
            raise forms.ValidationError(str(exc))


@admin.register(LoopPolicy)
class LoopPolicyAdmin(AuditedAdmin, admin.ModelAdmin):
    form = LoopPolicyForm
    audit_name = "loop_policy"  # the policies page records the same actions, with the settings before and after
    list_display = ("label", "priority", "mode", "ladder", "auto", "interval_s", "repeat_limit", "repeat_window_days")


@admin.register(HealthEvent)
class HealthEventAdmin(admin.ModelAdmin):
    list_display = ("node", "check_id", "signature", "klass", "severity", "count", "first_seen", "last_seen", "open")
    list_filter = ("klass", "severity", "open")
    readonly_fields = [f.name for f in HealthEvent._meta.fields]
