"""The forms of every page."""

import uuid

from django import forms
from django.conf import settings

from cudaweb.accounts.audit import ACTIONS
from cudaweb.drift.catalog import LAYERS
from cudaweb.fleet.models import AcceptanceRecord
from cudaweb.nodes import states, validators
from cudaweb.nodes.keyfiles import KeyFileRefused, key_file_path
from cudaweb.nodes.models import Node, SSHCredential
from cudaweb.remote.connect import private_key_check
from cudaweb.remote.transports.base import AuthFailed
from cudaweb.validation import burnin as burnin_mode
from cudaweb.validation.models import ValidationRun


class NoEchoTextarea(forms.Textarea):
    """Never sends its value back to the browser: a private key in a form that failed stays out of the page."""

    def format_value(self, value):
        return None


class ShortEchoTextarea(forms.Textarea):
    """Sends its value back only when it is short: a 2 MiB paste is not returned in the page."""

    ECHO_MAX = 64 * 1024

    def format_value(self, value):
        value = super().format_value(value)
        limit = min(self.ECHO_MAX, settings.CUDAWEB_TRIAGE_CAP)
        return value if value is None or len(value) <= limit else None


def _checked(check, value):
    """The node rule (cudaweb.nodes.validators) as a form field's check."""
    try:
        return check(value)
    except validators.NodeFieldError as exc:
        raise forms.ValidationError(str(exc)) from None


class NodeForm(forms.Form):
    name = forms.CharField(max_length=validators.NAME_MAX, help_text=validators.NAME_RULE)
    address = forms.CharField(max_length=255, help_text="host name or IP address")
    port = forms.IntegerField(min_value=1, max_value=65535, initial=22)
    username = forms.CharField(max_length=64)
    private_key = forms.CharField(widget=NoEchoTextarea(attrs={"rows": 6}), required=False,
                                  help_text="OpenSSH private key; stored encrypted (never shown again: paste it "
                                            "again if the form comes back with an error)")
    key_path = forms.CharField(required=False, max_length=500,
                               help_text="or: a key file in the worker host's key directory (CUDAWEB_KEY_DIR)")
    credential = forms.ModelChoiceField(queryset=SSHCredential.objects.order_by("name"), required=False,
                                        help_text="or: a credential already stored")
    # Asked, not guessed: a node's python3 is most often the system's, without torch (the run then fails at
    # torch.import); the interpreter is the one the jobs use, a venv or conda env.
    python_path = forms.CharField(
        max_length=500, label="Python with torch",
        widget=forms.TextInput(attrs={"placeholder": "/opt/venv/bin/python"}),
        help_text="full path of the interpreter on the node that jobs use and that imports torch (on the node: "
                  "<path> -c 'import torch'); a node's plain python3 is often the system's, without torch")
    labels = forms.CharField(required=False, max_length=4000, help_text="comma separated")

    def clean_name(self):
        name = _checked(validators.name_check, self.cleaned_data["name"])
        if Node.objects.filter(name=name).exists():
            raise forms.ValidationError("a node with this name exists")
        return name

    def clean_address(self):
        return _checked(validators.address_clean, self.cleaned_data["address"])

    def clean_username(self):
        return _checked(validators.username_check, self.cleaned_data["username"])

    def clean_key_path(self):
        path = self.cleaned_data["key_path"].strip()
        if path:
            try:
                key_file_path(path)  # inside the key directory; read by the worker, not here
            except KeyFileRefused as exc:
                raise forms.ValidationError(str(exc))
        return path

    def clean_labels(self):
        return _checked(validators.labels_clean, self.cleaned_data["labels"].split(","))

    def clean(self):
        data = super().clean()
        if not data.get("private_key") and not data.get("key_path") and not data.get("credential"):
            raise forms.ValidationError("give a private key, a key path or an existing credential")
        if data.get("private_key"):
            try:
                private_key_check(data["private_key"])
            except AuthFailed as exc:
                self.add_error("private_key", str(exc))
        return data


class NodeEditForm(forms.Form):
    """An SSH node's way in, changed by an admin: the add-node rule (validators) for each field."""
    address = forms.CharField(max_length=255)
    port = forms.IntegerField(min_value=1, max_value=65535)
    username = forms.CharField(max_length=64)
    python_path = forms.CharField(max_length=500, help_text="interpreter on the node that has torch")
    labels = forms.CharField(required=False, max_length=4000, help_text="comma separated")

    def clean_address(self):
        return _checked(validators.address_clean, self.cleaned_data["address"])

    def clean_username(self):
        return _checked(validators.username_check, self.cleaned_data["username"])

    def clean_labels(self):
        return _checked(validators.labels_clean, self.cleaned_data["labels"].split(","))


class BurninFields(forms.Form):
    """The burn-in length beside a mode: 5 min, 30 min, 2 h or custom seconds; cleaned_data["burnin_seconds"] is
    the length in burn-in mode, None in the others."""

    burnin = forms.ChoiceField(choices=[(str(s), name) for s, name in burnin_mode.DURATIONS] + [("custom", "custom")],
                               initial=str(burnin_mode.DEFAULT_SECONDS), required=False, label="burn-in length")
    burnin_custom_s = forms.IntegerField(min_value=burnin_mode.MIN_SECONDS, max_value=burnin_mode.MAX_SECONDS,
                                         required=False, label="custom burn-in, seconds",
                                         widget=forms.NumberInput(attrs={"placeholder": "seconds", "size": 6}))

    def clean(self):
        data = super().clean()
        data["burnin_seconds"] = None
        if burnin_mode.is_burnin(data.get("mode")):
            choice = data.get("burnin") or str(burnin_mode.DEFAULT_SECONDS)
            if choice != "custom":
                data["burnin_seconds"] = int(choice)
            elif data.get("burnin_custom_s"):
                data["burnin_seconds"] = data["burnin_custom_s"]
            elif "burnin_custom_s" not in self.errors:
                self.add_error("burnin_custom_s", "give the burn-in's length in seconds (%d to %d)" % (
                    burnin_mode.MIN_SECONDS, burnin_mode.MAX_SECONDS))
        return data


class ValidateForm(BurninFields):
    mode = forms.ChoiceField(choices=ValidationRun.Mode.choices, initial=ValidationRun.Mode.QUICK)

    field_order = ["mode", "burnin", "burnin_custom_s"]


class OnboardValidateForm(BurninFields):
    """The wizard's validation: full, or full + burn-in, before the decision."""

    mode = forms.ChoiceField(choices=[(m, ValidationRun.Mode(m).label) for m in (ValidationRun.Mode.FULL,
                                                                                ValidationRun.Mode.BURNIN)],
                             initial=ValidationRun.Mode.FULL, required=False)

    field_order = ["mode", "burnin", "burnin_custom_s"]

    def clean_mode(self):
        return self.cleaned_data.get("mode") or ValidationRun.Mode.FULL




class FleetFilterForm(forms.Form):
    q = forms.CharField(required=False, label="search", widget=forms.TextInput(
        attrs={"type": "search", "placeholder": "name or address"}))
    status = forms.ChoiceField(choices=[("", "any state")] + [(s.key, s.label) for s in states.STATES.values()],
                               required=False)
    gpu_model = forms.CharField(required=False)
    label = forms.CharField(required=False)
    failing_layer = forms.ChoiceField(choices=[("", "any layer")] + [(layer, layer) for layer in LAYERS] + [
        ("none", "failing, no layer")], required=False)
    sort = forms.ChoiceField(choices=[(s, s) for s in ("name", "-name", "status", "-status", "validated",
                                                       "-validated", "gpu", "-gpu")], required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # the states as the registry holds them now: a module may define one after this one was imported
        self.fields["status"].choices = [("", "any state")] + [(s.key, s.label) for s in states.STATES.values()]


class BulkValidateForm(BurninFields):
    nodes = forms.ModelMultipleChoiceField(queryset=Node.objects.all(), required=False)
    label = forms.CharField(required=False)
    mode = forms.ChoiceField(choices=ValidationRun.Mode.choices, initial=ValidationRun.Mode.QUICK)

    def clean(self):
        data = super().clean()
        if not data.get("nodes") and not data.get("label"):
            raise forms.ValidationError("choose nodes or a label")
        return data


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=AcceptanceRecord.Decision.choices, widget=forms.RadioSelect)
    token = forms.UUIDField(widget=forms.HiddenInput, initial=uuid.uuid4)  # one decision per form shown
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=5000)


class ScheduleForm(BurninFields):
    node = forms.ModelChoiceField(queryset=Node.objects.order_by("name"), required=False)
    label = forms.CharField(required=False, max_length=100)
    every_hours = forms.IntegerField(min_value=1, max_value=24 * 30, initial=24)
    mode = forms.ChoiceField(choices=ValidationRun.Mode.choices, initial=ValidationRun.Mode.STANDARD)

    field_order = ["node", "label", "every_hours", "mode", "burnin", "burnin_custom_s"]


class TriageForm(forms.Form):
    text = forms.CharField(widget=ShortEchoTextarea(attrs={"rows": 14, "spellcheck": "false"}), required=False,
                           label="Paste a traceback or log", strip=False)
    upload = forms.FileField(required=False, label="or upload a log file")

    def clean(self):
        data = super().clean()
        cap = settings.CUDAWEB_TRIAGE_CAP
        upload = data.get("upload")
        if upload is not None:
            if upload.size > cap:
                raise forms.ValidationError("the file is %d bytes; the limit is %d bytes" % (upload.size, cap))
            data["text"] = upload.read(cap).decode("utf-8", "replace")
        if len((data.get("text") or "").encode("utf-8", "replace")) > cap:
            raise forms.ValidationError("the text is over the %d-byte limit" % cap)
        if not (data.get("text") or "").strip():
            raise forms.ValidationError("paste some text or choose a file")
        return data


class VoteForm(forms.Form):
    helped = forms.TypedChoiceField(choices=[("1", "fixed it"), ("0", "did not help")], coerce=lambda v: v == "1")


class NetworkTestForm(forms.Form):
    nodes = forms.ModelMultipleChoiceField(queryset=Node.objects.order_by("name"), required=False)
    label = forms.CharField(required=False, max_length=100)
    plan = forms.ChoiceField(required=False, choices=[("", "pairs (every pair up to 8 nodes, else a ring)")] + [
        ("allreduce", "one all-reduce over all of them, bisected when slow")])

    def clean(self):
        data = super().clean()
        if len(data.get("nodes") or []) < 2 and not data.get("label"):
            raise forms.ValidationError("choose two nodes or more, or a label")
        return data


class AuditFilterForm(forms.Form):
    """The audit page's filters; its exports take the same query string."""

    actor = forms.CharField(required=False, max_length=150, help_text="username",
                            widget=forms.TextInput(attrs={"placeholder": "who (username)"}))
    action = forms.ChoiceField(required=False)
    object_type = forms.ChoiceField(required=False)
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="from")
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="to")

    def __init__(self, *args, object_types=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["action"].choices = [("", "any action")] + sorted(ACTIONS.items())
        self.fields["object_type"].choices = [("", "any object")] + [(t, t) for t in object_types]
