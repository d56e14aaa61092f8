"""The request form, generated from the workflow's rules in force (a JSON Schema).

The form only collects fields: whether a payload is acceptable is decided by the rules
(`approvals.rules.payload_problems`, called by the services), and their reasons are attached to the
fields they name, so the requester sees each one beside its field.
"""

import re

from django import forms

from approvals.rules import text_is_multiline

_REQUIRED = re.compile(r"'([^']+)' is a required property")


def _label(name: str) -> str:
    return name.replace("_", " ").capitalize()


def _field_for(name: str, spec: dict, required: bool) -> forms.Field:
    kind = spec.get("type")
    common = {"label": _label(name), "required": False, "help_text": spec.get("description", "")}
    attrs = {"required": "required"} if required else {}
    if "enum" in spec:
        choices = [("", "choose…")] + [(str(v), str(v)) for v in spec["enum"]]
        # A plain field with a select: whether the value is allowed is the rules' to say, with their reason.
        return forms.CharField(widget=forms.Select(attrs=attrs, choices=choices), **common)
    if kind == "integer":
        return forms.IntegerField(widget=forms.NumberInput(attrs=attrs), **common)
    if kind == "number":
        return forms.FloatField(widget=forms.NumberInput(attrs=attrs), **common)
    if kind == "boolean":
        return forms.BooleanField(**common)
    if "email" in name:
        return forms.CharField(widget=forms.EmailInput(attrs=attrs), strip=True, **common)
    if text_is_multiline(name, spec):
        return forms.CharField(
            widget=forms.Textarea(attrs={**attrs, "rows": 3}), strip=True, **common
        )
    return forms.CharField(widget=forms.TextInput(attrs=attrs), strip=True, **common)


class RequestForm(forms.Form):
    """A workspace (for a new request), the payload's fields and, for a revision, why it changed."""

    def __init__(
        self,
        *args,
        schema: dict,
        workspaces: list[tuple[int, str]] | None = None,
        with_reason: bool = False,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        if workspaces is not None:
            self.fields["workspace"] = forms.TypedChoiceField(
                label="Workspace",
                coerce=int,
                choices=[(pk, f"{name} (#{pk})") for pk, name in workspaces],
            )
        required = set(schema.get("required", []))
        self.payload_fields = []
        for name, spec in schema.get("properties", {}).items():
            if isinstance(spec, dict) and spec.get("type") in (
                "string",
                "integer",
                "number",
                "boolean",
                None,
            ):
                self.fields[name] = _field_for(name, spec, name in required)
                self.payload_fields.append(name)
        if with_reason:
            self.fields["reason"] = forms.CharField(
                label="What changed and why", required=False, max_length=500
            )

    def payload(self) -> dict:
        """The fields filled in; an empty one is left out, so the rules can say that it is required."""
        data = self.cleaned_data
        return {
            name: data[name] for name in self.payload_fields if data.get(name) not in (None, "")
        }

    def add_reasons(self, reasons: list[str]) -> None:
        """Attach each reason of the rules to the field it names; the others go above the form."""
        for reason in reasons:
            where, _, text = reason.partition(": ")
            missing = _REQUIRED.search(text) if where == "payload" else None
            field = missing.group(1) if missing else where
            if field in self.payload_fields:
                self.add_error(field, "required" if missing else text)
            else:
                self.add_error(None, reason)
