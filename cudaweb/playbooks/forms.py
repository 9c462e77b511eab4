from django import forms
from django.conf import settings


class TriageForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}), required=False,
                           label="Paste a traceback or log")
    upload = forms.FileField(required=False, label="or upload a log file")

    def clean(self):
        data = super().clean()
        cap = settings.CUDAWEB_TRIAGE_CAP
        upload = data.get("upload")
        if upload is not None:
            if upload.size > cap:
                raise forms.ValidationError("the file is %d bytes; the limit is %d bytes" % (upload.size, cap))
            data["text"] = upload.read(cap).decode("utf-8", "replace")
        if len(data.get("text") or "") > cap:
            raise forms.ValidationError("the text is over the %d-byte limit" % cap)
        if not (data.get("text") or "").strip():
            raise forms.ValidationError("paste some text or choose a file")
        return data


class VoteForm(forms.Form):
    helped = forms.TypedChoiceField(choices=[("1", "fixed it"), ("0", "did not help")], coerce=lambda v: v == "1")
