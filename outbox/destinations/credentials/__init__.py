"""A destination's secrets: where they may come from (`secret_places`) and OAuth2 client credentials (`oauth2`)."""
