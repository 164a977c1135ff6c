"""kconnect.connectors."""
