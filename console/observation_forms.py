"""The forms of the observation screens: what the current process did with one case, a CSV of many, the
owner's explanation of a disagreement and the owner's typed confirmation that a workflow goes live."""

from django import forms

from approvals.services.observation import MAX_TEXT, CurrentProcessOutcome
from approvals.services.observation_import import MAX_BYTES


class OutcomeForm(forms.Form):
    task_created = forms.TypedChoiceField(
        label="Did the current process create the task?",
        choices=[("yes", "Yes"), ("no", "No")],
        widget=forms.RadioSelect,
        coerce=lambda value: value == "yes",
    )
    receiver = forms.CharField(
        label="Where (the receiving system it was created at)",
        required=False,
        max_length=40,
        help_text="A destination's name, as the product names it; empty if not known.",
    )
    outcome = forms.CharField(
        label="What the current process did",
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    reference = forms.CharField(
        label="Its reference (ticket, task id)", required=False, max_length=120
    )

    def entry(self, key: str) -> CurrentProcessOutcome:
        data = self.cleaned_data
        return CurrentProcessOutcome(
            key=key,
            task_created=data["task_created"],
            receiver=data["receiver"].strip(),
            outcome=data["outcome"].strip(),
            reference=data["reference"].strip(),
        )


class ImportForm(forms.Form):
    file = forms.FileField(
        label="CSV file",
        help_text="Columns: action_key, task_created (yes/no), receiver, outcome, reference; "
        f"at most {MAX_BYTES // 1024} KiB.",
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_BYTES:
            raise forms.ValidationError(f"the file is larger than {MAX_BYTES // 1024} KiB")
        return upload


class ExplainForm(forms.Form):
    explanation = forms.CharField(
        label="Why they differ, and what is done about it",
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class GoLiveForm(forms.Form):
    confirmation = forms.CharField(label="Type the workflow's name to confirm", max_length=40)
    reason = forms.CharField(
        label="Note for the audit trail (optional)", required=False, max_length=MAX_TEXT
    )
