"""`python -m hybridsearch.cli ...` (the launcher starts each service this way)."""

from hybridsearch.cli import app

app()
