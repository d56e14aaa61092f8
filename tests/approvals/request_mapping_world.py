"""The world of the request-mapping tests: a CRM-like destination whose create path takes the object's name
(`/services/data/sobjects/{object}/`), an onboarding schema, and two mappings (Salesforce's field names for
the account, HubSpot's `properties` envelope for the contact); an smtp destination and an e-mail mapping."""

from django.contrib.auth import get_user_model

from approvals.services.workflow_files import workflows_apply
from outbox.models import DestinationConfig
from tests.factories import onboarding_world

SCHEMA = {
    "type": "object",
    "required": ["client_name", "contact_email", "plan"],
    "properties": {
        "client_name": {"type": "string", "minLength": 1, "maxLength": 200},
        "contact_email": {"type": "string", "minLength": 3, "maxLength": 254},
        "plan": {"type": "string", "enum": ["starter", "standard", "enterprise"]},
        "notes": {"type": "string", "maxLength": 2000},
    },
    "additionalProperties": True,
}
# Salesforce's field names for the account; HubSpot's envelope for the contact.
ACCOUNT = {
    "path": {"object": "Account"},
    "body": {
        "Name": {"$": "client_name"},
        "Plan__c": {"$": "plan"},
        "Description": {"$": "notes", "default": ""},
    },
}
CONTACT = {
    "path": {"object": "Contact"},
    "query": {"source": "handoff"},
    "body": {
        "properties": {
            "email": {"$": "contact_email"},
            "company": {"$": "client_name"},
            "slug": {"$": "join('-', [plan, client_name])"},
        }
    },
}
# An e-mail mapping for the welcome-mail destination (`mail_row`): text templates and an expression.
WELCOME = {
    "subject": "Welcome aboard, ${client_name}",
    "text": "Hello ${client_name},\n\nyour ${plan} plan starts today.\n",
    "to": {"$": "contact_email"},
}


def mail_row(port: int = 9) -> DestinationConfig:
    return DestinationConfig.objects.create(
        name="welcome-mail",
        kind="smtp",
        config={
            "host": "127.0.0.1",
            "port": port,
            "security": "none",
            "from_address": "welcome@handoff.example",
            "to": "contact_email",
            "subject": "Destination-level subject, $client_name",
            "body": "Destination-level body.\n",
            "timeout": 5,
            "retry": {"base_delay": 0, "max_delay": 0},
        },
    )


def crm_row(url: str = "http://127.0.0.1:9") -> DestinationConfig:
    return DestinationConfig.objects.create(
        name="crm",
        kind="idempotency_key_http",
        config={
            "url": url,
            "create": {"method": "POST", "path": "/services/data/sobjects/{object}/"},
            "auth": {"scheme": "bearer", "token_env": "HANDOFF_DEST_CRM_TOKEN"},
            "receipt": {"id": "id", "payload": "record"},
            "retry": {"base_delay": 0, "max_delay": 0},
        },
    )


def workflows(*steps: dict) -> dict:
    return {"workflows": [{"name": "onboarding", "schema": SCHEMA, "steps": list(steps)}]}


def step(name: str, request: dict | None, destination: str = "crm") -> dict:
    entry = {"name": name, "destination": destination}
    return {**entry, "request": request} if request is not None else entry


def mapping_world(monkeypatch) -> dict:
    """`onboarding_world` with a rules admin (`admin`) and the CRM's token in the environment."""
    monkeypatch.setenv("HANDOFF_DEST_CRM_TOKEN", "crm-token")
    world = onboarding_world()
    world["admin"] = get_user_model().objects.create_superuser("rules-admin", password="x-long-pw")
    return world


def apply(world, document: dict) -> None:
    workflows_apply(document=document, actor=world["admin"])
