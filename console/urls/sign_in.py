"""Sign-in and sign-out, and the identity provider's two legs (404 while single sign-on is off).

The provider's names are mozilla-django-oidc's, unnamespaced, because the library reverses them."""

from django.urls import path

from console.views import second_factor, sessions
from console.views import sign_in as views

urlpatterns = [
    path("login/", views.SignInView.as_view(), name="login"),
    path("logout/", views.sign_out, name="logout"),
    path("password/", views.PasswordChangeView.as_view(), name="password_change"),
    path("link/", views.link_account, name="link_account"),
    path("second-factor/", second_factor.second_factor, name="second_factor"),
    path("second-factor/enrol/", second_factor.second_factor_enrol, name="second_factor_enrol"),
    path("sessions/", sessions.my_sessions, name="my_sessions"),
    path("sessions/end", sessions.end_session, name="end_session"),
    path("sessions/end-others", sessions.end_other_sessions, name="end_other_sessions"),
    path("oidc/authenticate/", views.SignInRequestView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", views.SignInCallbackView.as_view(), name="oidc_authentication_callback"),
]
