"""The approver's correction form: the fields an approver may correct, labelled and typed as on the request
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
