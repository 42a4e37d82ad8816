"""One module per provider shape; each turns the placed neutral history into
that provider's request body (`Rendered`)."""
