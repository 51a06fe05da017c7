"""``pregelkit serve``: LangGraph's server API (the part the official
``langgraph-sdk`` client uses) over pregelkit's own database, queue and
workers, in the optional ``server`` extra (Starlette and uvicorn).

``import pregelkit`` never imports this package. The command line reaches it
through ``pregelkit serve`` (``cli/_serve.py`` loads it only then, so the
rest of the CLI works without the extra). It stands on the CLI's layer:
workflows are found (``cli._target``) and databases opened (``cli._db``)
exactly as ``pregelkit run`` and ``pregelkit worker`` do.

One module per job: ``_config`` (what is served), ``_auth`` (API keys),
``_hook`` (the config's auth hook), ``_schemas`` (run inputs checked),
``_body`` (request bodies: size limit, JSON, field types), ``_errors``
(JSON errors), ``_json`` (values as JSON), ``_api`` (what every route works
with), ``_app`` (the application), ``_static`` (``--static``: a web page
at ``/ui/``), and one module of routes per resource.
See docs/guides/serve.md.
"""

from pregelkit.server._api import Api
from pregelkit.server._app import create_app
from pregelkit.server._config import Served, load_served
from pregelkit.server._hook import AuthError

__all__ = ["Api", "AuthError", "Served", "create_app", "load_served"]
