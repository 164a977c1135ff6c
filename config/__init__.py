"""kconnect.config."""
