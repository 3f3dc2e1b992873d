"""gantry - the Python client of gantry's REST API, and helpers for programs that run as gantry jobs.

    import gantry
    g = gantry.Client()                      # GANTRY_URL / GANTRY_TOKEN, else the CLI's config file
    job = g.submit("deploy/examples/placement.json")
    print(g.wait(job["id"], timeout=120)["result"]["best"])

Standard library only (numpy and torch are used when present, for predictions).  Inside a program
job: ``from gantry import job`` (``job.report``, ``job.should_stop``, ``job.checkpoint_dir``, ...).
The API page: docs/sdk.md."""

from .client import TERMINAL, Client
from .errors import (ApiError, BadRequest, Conflict, ConnectionFailed, Forbidden, GantryError, IntegrityError, NotFound,
                     RateLimited, ServerError, Unauthorized, WaitTimeout)

__version__ = "0.1.0"
__all__ = ["Client", "TERMINAL", "ApiError", "BadRequest", "Conflict", "ConnectionFailed", "Forbidden", "GantryError",
           "IntegrityError", "NotFound", "RateLimited", "ServerError", "Unauthorized", "WaitTimeout", "connect"]


def connect(url=None, token=None, **kw):
    """A :class:`Client` (the same as ``Client(url, token, **kw)``)."""
    return Client(url, token, **kw)
