"""kconnect.rest."""
