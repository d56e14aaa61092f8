"""The http kind and what the HTTP kinds share: the destination (`destination`), how its requests leave this
machine (`connections`), what an answer means (`answers`), the header and path fields a configuration may give
(`fields`), a route's mapped request, an undo request and a pulled work-status read."""
