"""Who may call what: API keys on every public RPC, the collections a request touches, admission."""
