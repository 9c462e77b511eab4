"""The loop's policies per label (admins): every LoopPolicy and the defaults of the settings, each created, changed
or deleted here, audited with its settings before and after (cudaweb.health.services.loop_policy_*)."""

from django import forms
from django.contrib import messages
from django.core.validators import MinValueValidator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from cudaweb.fleet.access import guarded
from cudaweb.health import machine, selectors, services
from cudaweb.health.models import LoopPolicy
from cudaweb.health.policy import ladder_check
from cudaweb.nodes import validators


class LoopPolicyForm(forms.ModelForm):
    """A label's policy; the ladder as rungs separated by commas, checked by ladder_check."""

    ladder = forms.CharField(required=False, max_length=200, help_text="rungs in order, separated by commas, of: %s"
                             % ", ".join(machine.RUNGS), widget=forms.TextInput(attrs={"size": 40}))

    class Meta:
        model = LoopPolicy
        fields = services.POLICY_FIELDS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["ladder"] = ", ".join(self.instance.ladder or [])
        for name, label in (("interval_s", "Interval (s)"), ("repeat_limit", "Repeat limit"),
                            ("repeat_window_days", "Repeat window (days)")):
            field = self.fields[name]
            field.label = label
            field.widget.attrs["min"] = 1
            field.validators.append(MinValueValidator(1))  # a limit of 0 would send every fault to RMA
        self.fields["repeat_limit"].help_text = "the n-th remediation of one root cause within the window sends " \
            "the node to RMA"

    def clean_label(self):
        label = self.cleaned_data["label"].strip()
        if not validators.LABEL.fullmatch(label):
            raise forms.ValidationError("a label: letters, digits, . _ - inside, at most 63 characters")
        return label

    def clean_ladder(self):
        rungs = [r.strip() for r in (self.cleaned_data["ladder"] or "").split(",") if r.strip()]
        try:
            return list(ladder_check(rungs))
        except ValueError as exc:
            raise forms.ValidationError(str(exc))


def _fields(form):
    return {name: form.cleaned_data[name] for name in services.POLICY_FIELDS}


@guarded
def loop_policies(request):
    """The list, and (POST) a new label's policy."""
    form = LoopPolicyForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        policy = services.loop_policy_save(user=request.user, **_fields(form))
        messages.info(request, "Policy for label %s created." % policy.label)
        return redirect("fleet:loop_policies")
    return render(request, "fleet/loop/policies.html", dict(selectors.policies(), form=form))


@guarded
def loop_policy_edit(request, policy_id):
    policy = get_object_or_404(LoopPolicy, id=policy_id)
    form = LoopPolicyForm(request.POST or None, instance=policy)
    if request.method == "POST" and form.is_valid():
        policy = services.loop_policy_save(user=request.user, policy=LoopPolicy.objects.get(id=policy_id),
                                           **_fields(form))
        messages.info(request, "Policy for label %s saved." % policy.label)
        return redirect("fleet:loop_policies")
    return render(request, "fleet/loop/policy_edit.html", {"policy": policy, "form": form})


@guarded
@require_POST
def loop_policy_delete(request, policy_id):
    policy = get_object_or_404(LoopPolicy, id=policy_id)
    services.loop_policy_delete(user=request.user, policy=policy)
    messages.info(request, "Policy for label %s deleted: its nodes follow the next policy or the defaults." %
                  policy.label)
    return redirect("fleet:loop_policies")
