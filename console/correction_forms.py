"""The correction forms: the approver's, on the request page, and the operator's, on a handoff's page. The
approver's: the fields an approver may correct, labelled and typed as on the request
form (the rules' schema: a plan is a choice of the rules' plans, an e-mail an e-mail field), with their
current values. Only the fields `approvals.selectors.approver_correctable` offers are on it; whether a value
is acceptable stays the rules' to say (the service validates the corrected payload)."""

from console.forms import RequestForm


class CorrectionForm(RequestForm):
    """`RequestForm` on the offered fields only, each posted as `field_<name>` (the correction's address
    since before it was typed). It renders the fields; the view passes what was posted to the service, which
    refuses a field not offered and validates the corrected payload."""

    def __init__(self, *args, schema: dict, offered: dict[str, str], **kwargs):
        properties = schema.get("properties", {})
        narrowed = {
            **schema,
            "properties": {name: properties.get(name, {"type": "string"}) for name in offered},
        }
        super().__init__(*args, schema=narrowed, initial=dict(offered), **kwargs)
        for name in self.payload_fields:
            self.fields[name].widget.attrs.pop("required", None)

    def add_prefix(self, field_name: str) -> str:
        return f"field_{field_name}"


# What a blank field of the operator's correction means: a hidden value kept, a missing one left out.
KEEP_HIDDEN = "hidden; leave blank to keep"
LEAVE_OUT = "missing; leave blank to leave it out"


class HandoffCorrectionForm(CorrectionForm):
    """The operator's correction on a handoff's page, labelled and typed as on the request form: the fields of
    `approvals.selectors.correction_fields` (a sensitive value shown blank and kept unless retyped; a text field
    the rules name that the payload lacks, blank, so that it can be added), each saying what blank means."""

    def __init__(self, *args, schema: dict, fields: list[dict], **kwargs):
        super().__init__(
            *args, schema=schema, offered={f["name"]: f["value"] for f in fields}, **kwargs
        )
        for field in fields:
            hint = KEEP_HIDDEN if field["sensitive"] else LEAVE_OUT if field["missing"] else ""
            if hint:
                self.fields[field["name"]].widget.attrs["placeholder"] = hint
                self.fields[field["name"]].help_text = hint
