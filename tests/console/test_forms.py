"""The request form's widgets follow the rules' fields: an e-mail address is one line (an e-mail input) even
though it may be 254 characters long (it was a three-row text area); long free text is a text area."""

from approvals.rules import BUILT_IN_RULES
from console.forms import RequestForm


def test_contact_email_is_an_email_input_and_notes_a_text_area():
    html = str(RequestForm(schema=BUILT_IN_RULES["onboarding"].schema))
    assert 'type="email" name="contact_email"' in html
    assert '<textarea name="notes"' in html
    assert 'type="text" name="client_name"' in html
