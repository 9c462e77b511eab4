from django import forms

from cudaweb.fleet.models import Node
from cudaweb.validation.models import ValidationRun


class NodeForm(forms.Form):
    name = forms.SlugField(max_length=100)
    address = forms.CharField(max_length=255, help_text="host name or IP address")
    port = forms.IntegerField(min_value=1, max_value=65535, initial=22)
    username = forms.RegexField(regex=r"^[a-z_][a-z0-9_.-]*$", max_length=64)
    private_key = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False,
                                  help_text="OpenSSH private key; stored encrypted")
    key_path = forms.CharField(required=False, help_text="or: path to a key file on the worker host")
    python_path = forms.CharField(initial="python3", max_length=500,
                                  help_text="interpreter on the node that has torch")
    labels = forms.CharField(required=False, help_text="comma separated")

    def clean_name(self):
        name = self.cleaned_data["name"]
        if Node.objects.filter(name=name).exists():
            raise forms.ValidationError("a node with this name exists")
        return name

    def clean_labels(self):
        return [label.strip() for label in self.cleaned_data["labels"].split(",") if label.strip()]

    def clean(self):
        data = super().clean()
        if not data.get("private_key") and not data.get("key_path"):
            raise forms.ValidationError("give a private key or a key path")
        if data.get("private_key"):
            from cudaweb.validation.transports.base import AuthFailed
            from cudaweb.validation.transports.ssh import load_private_key

            try:
                load_private_key(data["private_key"])
            except AuthFailed as exc:
                self.add_error("private_key", str(exc))
        return data


class ValidateForm(forms.Form):
    mode = forms.ChoiceField(choices=ValidationRun.Mode.choices, initial=ValidationRun.Mode.QUICK)
