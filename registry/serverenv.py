"""The process's environment kept out of requests.

granian builds each request's WSGI environ on a copy of the server process's environment
(``dict(os.environ) | request``), as CGI did. Left there, a secret in the environment
(``DATABASE_URL`` with its password) is part of every request's ``request.META``, and a variable
named like a header (``HTTP_X_FORWARDED_FOR``, ``HTTP_AUTHORIZATION``) stands in for that header
whenever a client does not send it. `without_server_environment` takes out every entry that is
the process's own: a name of its environment that the server did not set for this request."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from registry.fastpath import StartResponse, WSGIApp

#: what granian's SERVER_SOFTWARE says; other servers (gunicorn) leave the environment out
COPYING_SERVERS = frozenset({"Granian"})


def without_server_environment(app: WSGIApp) -> WSGIApp:
    """app, answering with the entries of the process's environment removed from each request's
    environ under a server that copies them in (an entry the request set to a value of its own is
    kept)."""
    own = dict(os.environ)

    def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("SERVER_SOFTWARE") in COPYING_SERVERS:
            for name, value in own.items():
                if environ.get(name) == value:
                    del environ[name]
        return app(environ, start_response)

    return application
