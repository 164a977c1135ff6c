"""The web console at ``/ui``: static files (``static/``, package data of the wheel) and the route serving
them (:mod:`kconnect.rest.ui.routes`). The console is a plain-JavaScript client of the REST API: it has no
endpoint of its own."""
