"""Who may call and what is kept secret: API keys, client access, TLS, sealing at rest, hashed terms."""
