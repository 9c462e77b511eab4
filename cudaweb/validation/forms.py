from django import forms

from cudaweb.fleet.models import Node
from cudaweb.validation.models import ValidationRun


class ScheduleForm(forms.Form):
    node = forms.ModelChoiceField(queryset=Node.objects.order_by("name"), required=False)
    label = forms.CharField(required=False, max_length=100)
    every_hours = forms.IntegerField(min_value=1, max_value=24 * 30, initial=24)
    mode = forms.ChoiceField(choices=ValidationRun.Mode.choices, initial=ValidationRun.Mode.STANDARD)
