"""Sign-in: the OpenID Connect backend, the group-to-role mapping and who may still use a password."""
