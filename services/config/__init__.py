"""Settings: the deployment's (settings.py) and what each collection declares (collections.py)."""
