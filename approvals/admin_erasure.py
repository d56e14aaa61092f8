"""The admin's erasure action (issue 39, "Erase on request"): support staff who hold the "erase personal
data" permission pick one request, confirm its data subject (its e-mail, or a business id) and a reason on a
confirmation page, and the same service as `manage.py erase` erases them (`approvals/services/erasure.py`).
Nothing is erased by opening the page; everyone else is not offered the action."""

from django.contrib import messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

from approvals.errors import ApprovalDenied, InvalidPayload
from approvals.services.erasure import (
    ERASE_PERMISSION,
    ErasureRefused,
    subject_erase,
    subject_named,
)
from outbox.search_text import EMAIL_KEY_PART


def may_erase(user) -> bool:
    """Support staff (admin access) holding the erase permission."""
    return user.is_active and user.is_staff and user.has_perm(ERASE_PERMISSION)


def _email_of(payload: object) -> str:
    if not isinstance(payload, dict):
        return ""
    found = [
        value
        for key, value in sorted(payload.items())
        if EMAIL_KEY_PART in str(key).lower() and isinstance(value, str) and "@" in value
    ]
    return found[0] if found else ""


def erase_subject_action(modeladmin, request, queryset):
    """Erase the data subject of the one request chosen, after a confirmation page. Offered only to those who
    `may_erase` (`allowed_permissions`); the service checks the permission again."""
    rows = list(queryset[:2])
    if len(rows) != 1:
        modeladmin.message_user(
            request, "Choose exactly one request: its data subject is erased.", messages.WARNING
        )
        return None
    chosen = rows[0]
    form = {
        "email": request.POST.get("email", _email_of(chosen.payload)),
        "business_id": request.POST.get("business_id", ""),
        "reason": request.POST.get("reason", ""),
    }
    problem = ""
    if request.POST.get("confirm"):
        try:
            subject = subject_named(email=form["email"], business_id=form["business_id"])
            erasures = subject_erase(subject=subject, reason=form["reason"], actor=request.user)
        except (InvalidPayload, ApprovalDenied, ErasureRefused) as exc:
            problem = str(exc)
        else:
            words = "; ".join(
                f"workspace {e.workspace_id}: {e.counts_words or 'nothing'}" for e in erasures
            )
            modeladmin.message_user(
                request, f"Erased: {words or 'no request names this subject'}.", messages.SUCCESS
            )
            return None
    return TemplateResponse(
        request,
        "approvals/admin_erase.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Erase a data subject",
            "chosen": chosen,
            "form": form,
            "problem": problem,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "opts": modeladmin.model._meta,
        },
        status=422 if problem else 200,
    )


erase_subject_action.short_description = "Erase this request's data subject (asks first)"
erase_subject_action.allowed_permissions = ("erase",)
