"""gantry.config - where the server is and which token to use: the same rules as the ``gantry`` CLI.

``GANTRY_URL`` and ``GANTRY_TOKEN`` override the config file, ``$GANTRY_CONFIG`` (default
``~/.config/gantry/config``, JSON ``{"url", "token"}``, written by ``gantry login``).  A config
file that group or others may read is refused, as the CLI refuses it: it holds a token."""

import json
import os
import stat

from .errors import GantryError

DEFAULT_URL = "http://127.0.0.1:8080"


def config_path():
    """the config file's path: $GANTRY_CONFIG, else ~/.config/gantry/config"""
    env = os.environ.get("GANTRY_CONFIG")
    if env:
        return env
    return os.path.join(os.environ.get("HOME") or ".", ".config", "gantry", "config")


def load(url=None, token=None):
    """(url, token): the arguments first, then GANTRY_URL / GANTRY_TOKEN, then the config file, then the
    default URL (the token may stay None: the probes and the API description need none)"""
    cfg = {}
    path = config_path()
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and (url is None or token is None):
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise GantryError(f"{path} is readable by others (mode {stat.S_IMODE(st.st_mode):03o}); it holds a token: "
                              f"chmod 600 {path}")
        try:
            with open(path) as f:
                cfg = json.load(f)
        except ValueError as e:
            raise GantryError(f"{path}: {e}") from None
        if not isinstance(cfg, dict):
            raise GantryError(f"{path}: not a JSON object")
    url = url or os.environ.get("GANTRY_URL") or cfg.get("url") or DEFAULT_URL
    token = token or os.environ.get("GANTRY_TOKEN") or cfg.get("token")
    return url.rstrip("/"), token
