"""gantry.client - the REST API of a gantry server as Python calls (docs/sdk.md).

One :class:`Client` per server and token.  Every call answers the API's JSON as plain dicts and
lists, raises :class:`gantry.errors.ApiError` (a subclass per status) with the API's code, message
and field when the server refuses, and retries what is safe to retry when the connection fails: a
GET, PUT or DELETE, a prediction, and a job submission, which carries an ``Idempotency-Key`` so that
a retried submission is the same job."""

import hashlib
import http.client
import json
import os
import socket
import ssl
import time
import urllib.parse
import uuid

from . import config, errors, oip

TERMINAL = ("succeeded", "failed", "cancelled")
_RETRYABLE = (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
              http.client.RemoteDisconnected, http.client.IncompleteRead, socket.timeout, TimeoutError)


def _quote(s):
    return urllib.parse.quote(str(s), safe="@")


class Client:
    """A connection to one gantry server with one token.

    ``url`` and ``token`` default to ``GANTRY_URL`` / ``GANTRY_TOKEN``, else the CLI's config file
    (``$GANTRY_CONFIG``, default ``~/.config/gantry/config``), else ``http://127.0.0.1:8080``.
    ``timeout``: seconds per request (a stream's wait for its next line included); ``retries``: how
    many times a request safe to repeat is sent again after a connection error or a 503 with
    ``Retry-After`` (0.2 s, 0.4 s, ... apart, at most 3 s); ``cafile``: the CA that signed an HTTPS
    server's certificate (else the system's)."""

    def __init__(self, url=None, token=None, timeout=30.0, retries=4, cafile=None):
        self.url, self.token = config.load(url, token)
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise errors.GantryError(f"not an http(s) URL: {self.url!r}")
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._base = parts.path.rstrip("/")
        self.timeout, self.retries = timeout, retries
        self._ssl = ssl.create_default_context(cafile=cafile) if self._https else None
        self._signatures = {}

    def __repr__(self):
        return f"gantry.Client({self.url!r})"

    # ---- transport ----

    def _connection(self, timeout):
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _send(self, method, path, params=None, body=None, raw=None, headers=None, retry=None, timeout=None, stream=False):
        """one API call; the response (stream=True: open, the caller reads and closes it) or its parsed JSON"""
        if params:
            q = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
            if q:
                path += "?" + q
        h = {"Accept": "application/json", "User-Agent": "gantry-python/0.1"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        elif method == "POST" and raw is None:
            data = b"{}"  # an action without arguments (cancel): an empty JSON object
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        if retry is None:
            retry = method in ("GET", "HEAD", "PUT", "DELETE") or "Idempotency-Key" in h
        attempts = 1 + (self.retries if retry else 0)
        for attempt in range(attempts):
            conn = self._connection(timeout or self.timeout)
            try:
                conn.request(method, self._base + path, body=data, headers=h)
                r = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if attempt + 1 < attempts and isinstance(e, _RETRYABLE + (ConnectionError,)):
                    time.sleep(min(0.2 * 2 ** attempt, 3.0))
                    continue
                raise errors.ConnectionFailed(f"{method} {self.url}{path}: {e!r}") from e
            if r.status >= 400:
                payload = r.read()
                conn.close()
                ra = r.getheader("Retry-After")
                ra = float(ra) if ra and ra.replace(".", "", 1).isdigit() else None
                if r.status == 503 and ra is not None and attempt + 1 < attempts:
                    time.sleep(min(ra, 3.0))
                    continue
                raise errors.from_response(r.status, payload, ra)
            if stream:
                r._gantry_conn = conn  # closed with the response by the caller
                return r
            try:
                payload = r.read()
            finally:
                conn.close()
            ctype = r.getheader("Content-Type") or ""
            if "json" in ctype:
                return json.loads(payload) if payload else None
            return payload
        raise AssertionError("unreachable")

    @staticmethod
    def _sse(resp):
        """(event, data) pairs of a Server-Sent Events response until it ends; closes it"""
        try:
            event, data = "message", []
            while True:
                line = resp.readline()
                if not line:
                    return
                line = line.decode("utf-8", "replace").rstrip("\r\n")
                if line == "":
                    if data:
                        yield event, "\n".join(data)
                    event, data = "message", []
                elif line.startswith(":"):
                    continue
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:][1:] if line[5:].startswith(" ") else line[5:])
        finally:
            resp.close()
            resp._gantry_conn.close()

    # ---- who, what runs ----

    def whoami(self):
        """The token's tenant and role: ``{"role", "token_id", "tenant": {"id", "name"}}``."""
        return self._send("GET", "/v1/whoami")

    def workers(self):
        """The workers, their slots, kind, labels and what each runs (``GET /v1/workers``)."""
        return self._send("GET", "/v1/workers")["workers"]

    def cluster(self):
        """Utilization: workers, slots per tenant against quota, queue depths (``GET /v1/cluster``)."""
        return self._send("GET", "/v1/cluster")

    # ---- jobs ----

    def submit(self, job, idempotency_key=None):
        """Submits a job and returns it (``{"id", "state", ...}``).

        ``job`` is a dict (the API's job: ``{"type", "name", "spec", ...}``) or the path of a JSON file
        holding one (``deploy/examples/training.json``).  The request carries an ``Idempotency-Key``
        (``idempotency_key``, else a random one), so a submission retried after a connection error is
        the same job, never a second one; the same key with another body is a :class:`BadRequest` (422).
        A refused spec raises :class:`BadRequest` naming the field (``spec.graph.ops[3].compute_us``)."""
        if isinstance(job, (str, os.PathLike)):
            with open(job) as f:
                job = json.load(f)
        key = idempotency_key or uuid.uuid4().hex
        return self._send("POST", "/v1/jobs", body=job, headers={"Idempotency-Key": key})

    def job(self, job_id):
        """One job: state, timestamps, progress, spec and result (``GET /v1/jobs/{id}``); :class:`NotFound`
        for an unknown id or another tenant's job."""
        return self._send("GET", f"/v1/jobs/{_quote(job_id)}")

    get_job = job

    def jobs(self, type=None, state=None, limit=None, page_size=100):
        """The tenant's jobs, newest first, as a list: ``type`` (``placement``, ``training``,
        ``inference``, ``federated``) and ``state`` (``queued``, ``running``, ``succeeded``, ...) filter;
        ``limit`` caps how many (None: every page, followed through the API's cursor)."""
        return list(self.iter_jobs(type=type, state=state, limit=limit, page_size=page_size))

    list_jobs = jobs

    def iter_jobs(self, type=None, state=None, limit=None, page_size=100):
        """As :meth:`jobs`, one job at a time, reading a page (``page_size`` jobs) when needed."""
        cursor, n = None, 0
        while True:
            want = page_size if limit is None else min(page_size, limit - n)
            if want <= 0:
                return
            page = self._send("GET", "/v1/jobs", params={"type": type, "state": state, "limit": want, "cursor": cursor})
            for j in page["jobs"]:
                yield j
                n += 1
            cursor = page.get("next_cursor")
            if not cursor or not page["jobs"]:
                return

    def cancel(self, job_id):
        """Cancels a job; returns it.  :class:`Conflict` (409) when it has already finished."""
        return self._send("POST", f"/v1/jobs/{_quote(job_id)}/cancel")

    def wait(self, job_id, timeout=600.0, states=TERMINAL, interval=0.5):
        """Waits until the job is in one of ``states`` (by default: succeeded, failed or cancelled) and
        returns it; raises :class:`WaitTimeout` (its ``job`` the last state seen) after ``timeout`` seconds.
        A failed job is returned, not raised: look at ``job["state"]`` and ``job["error"]``."""
        deadline = time.monotonic() + timeout
        while True:
            j = self.job(job_id)
            if j["state"] in states:
                return j
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.WaitTimeout(f"job {job_id} still {j['state']} after {timeout:g} s", j)
            time.sleep(min(interval, left))

    def events(self, job_id, follow=True, interval=0.5, timeout=None):
        """The job's events (``{"id", "ts", "state", "reason", "source", "progress"}``), oldest first, as an
        iterator: queued, scheduled, running, progress, why it waits, the end.  With ``follow`` it goes on
        yielding new ones as they happen (polling every ``interval`` s) and stops after the job's final
        state; ``timeout`` (seconds) ends it earlier with :class:`WaitTimeout`."""
        seen = set()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            batch = self._send("GET", f"/v1/jobs/{_quote(job_id)}/events")["events"]
            final = False
            for e in batch:
                if e["id"] in seen:
                    continue
                seen.add(e["id"])
                yield e
                final = final or e.get("state") in TERMINAL
            if not follow or final:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.WaitTimeout(f"job {job_id}: no final event within {timeout:g} s")
            time.sleep(interval)

    def metrics(self, job_id, rank=None):
        """The job's progress points (its curves), oldest first: ``[{"ts", "step", "loss", ...}]``.  For a
        program job, ``rank`` picks the rank whose lines to read (default 0, the job's curves); the ranks
        that wrote any are ``metrics_ranks(job_id)``."""
        return self._send("GET", f"/v1/jobs/{_quote(job_id)}/metrics", params={"rank": rank})["points"]

    def metrics_ranks(self, job_id):
        """The ranks of a job that wrote metrics points (``[0]`` for built-in jobs)."""
        return self._send("GET", f"/v1/jobs/{_quote(job_id)}/metrics")["ranks"]

    def trials(self, job_id):
        """A hyper-parameter search's trials (``GET /v1/jobs/{id}/trials``, docs/search.md): ``{"algorithm",
        "metric", "mode", "rungs", "pause", "best", "trials": [{"trial", "job_id", "jobs", "params", "state",
        "last": {"value", "resource"}, "rungs": [...]}]}``; a job that is not a search raises NotFound."""
        return self._send("GET", f"/v1/jobs/{_quote(job_id)}/trials")

    def best_trial(self, job_id):
        """The search's best trial so far (the trials' ``best``: the best last reported metric), or None
        before any trial reported it."""
        t = self.trials(job_id)
        return next((x for x in t["trials"] if x["trial"] == t["best"]), None)

    def logs(self, job_id, rank=None, tail=None, follow=False):
        """A program job's output.  Without ``follow``: the last ``tail`` lines (default 100) of ``rank``, or
        of every rank (each line then starts ``[rank R] ``), as one string.  With ``follow``: an iterator of
        lines, the tail first, then each new line as the ranks print it, until the job ends (a rank's end
        is not a line; :meth:`follow_logs` gives those too).  :class:`NotFound` for a job that is not a
        program job."""
        if not follow:
            body = self._send("GET", f"/v1/jobs/{_quote(job_id)}/logs", params={"rank": rank, "tail": tail})
            return body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        return (data for kind, data in self.follow_logs(job_id, rank=rank, tail=tail) if kind == "log")

    def follow_logs(self, job_id, rank=None, tail=None):
        """The log stream as ``(kind, value)`` pairs until the job ends: ``("log", line)``,
        ``("end", {"rank", "generation", "reason"})`` when a rank's run ends, and last ``("done", {"state"})``."""
        resp = self._send("GET", f"/v1/jobs/{_quote(job_id)}/logs", params={"rank": rank, "tail": tail, "follow": 1},
                          headers={"Accept": "text/event-stream"}, stream=True, timeout=max(self.timeout, 60))
        for event, data in self._sse(resp):
            if event == "log":
                yield "log", data
            elif event in ("end", "done"):
                yield event, json.loads(data)
                if event == "done":
                    return

    def outputs(self, job_id):
        """The files a program job wrote to its output directory: ``[{"path", "bytes", "sha256"}]``
        (:class:`NotFound` while it has none: they are listed when the job ends)."""
        return self._send("GET", f"/v1/jobs/{_quote(job_id)}/outputs")["files"]

    def download(self, job_id, path, dest=None):
        """Downloads one output file of a job to ``dest`` (default: its file name in the current directory;
        a directory: the file name inside it) and returns the path written.  The file goes through
        ``dest + ".part"``; its size and SHA-256 are checked against the listing before it is renamed, and a
        mismatch raises :class:`IntegrityError` (nothing is left at ``dest``)."""
        listed = {f["path"]: f for f in self.outputs(job_id)}
        if path not in listed:
            raise errors.NotFound(404, "not_found", f"job {job_id} lists no output {path!r}", "path")
        if dest is None:
            dest = os.path.basename(path)
        elif os.path.isdir(dest):
            dest = os.path.join(dest, os.path.basename(path))
        quoted = "/".join(_quote(p) for p in path.split("/"))
        resp = self._send("GET", f"/v1/jobs/{_quote(job_id)}/outputs/{quoted}", headers={"Accept": "*/*"}, stream=True)
        part, digest, size = dest + ".part", hashlib.sha256(), 0
        try:
            with open(part, "wb") as f:
                while True:
                    chunk = resp.read(1 << 18)
                    if not chunk:
                        break
                    digest.update(chunk)
                    size += len(chunk)
                    f.write(chunk)
        except BaseException:
            _unlink(part)
            raise
        finally:
            resp.close()
            resp._gantry_conn.close()
        want = listed[path]
        if digest.hexdigest() != want["sha256"] or size != want["bytes"]:
            _unlink(part)
            raise errors.IntegrityError(f"{path}: got {size} bytes with SHA-256 {digest.hexdigest()}, the listing says "
                                        f"{want['bytes']} bytes with {want['sha256']}")
        os.replace(part, dest)
        return dest

    # ---- models ----

    def models(self):
        """The tenant's registered models (``GET /v1/models``)."""
        return self._send("GET", "/v1/models")["models"]

    def model(self, name):
        """A model: its versions (format, size, sha256, signature, metrics) newest first, and its aliases."""
        return self._send("GET", f"/v1/models/{_quote(name)}")

    def versions(self, name):
        """A model's versions, newest first."""
        return self.model(name)["versions"]

    def aliases(self, name):
        """A model's aliases: ``{"production": 2, ...}``."""
        return self.model(name)["aliases"]

    def upload_model(self, name, path, inputs=None, outputs=None, description=None, metrics=None, metadata=None):
        """Uploads a TorchScript file (``torch.jit.save``'s output) as the next version of model ``name`` and
        returns that version.

        The signature is ``metadata`` (a dict, or the path of a JSON file: ``{"inputs", "outputs"?,
        "description"?, "metrics"?}``) or the arguments ``inputs`` (``[{"name", "datatype", "shape": [-1,
        ...]}]``), ``outputs``, ``description``, ``metrics``.  The file's SHA-256 goes with it: the server
        refuses the upload (:class:`BadRequest` on ``sha256``) when what it received differs, and the
        version it answers is checked again here (:class:`IntegrityError`)."""
        if isinstance(metadata, (str, os.PathLike)):
            with open(metadata) as f:
                metadata = json.load(f)
        meta = dict(metadata or {})
        for k, v in (("inputs", inputs), ("outputs", outputs), ("description", description), ("metrics", metrics)):
            if v is not None:
                meta[k] = v
        with open(path, "rb") as f:
            data = f.read()
        sha = hashlib.sha256(data).hexdigest()
        return self._upload(name, data, meta, sha)

    def _upload(self, name, data, meta, sha):
        boundary = "gantry-" + uuid.uuid4().hex
        parts = [("metadata", None, "application/json", json.dumps(meta).encode()),
                 ("sha256", None, "text/plain", sha.encode()),
                 ("file", "model.pt", "application/octet-stream", data)]
        body = b""
        for pname, filename, ctype, payload in parts:
            disp = f'form-data; name="{pname}"' + (f'; filename="{filename}"' if filename else "")
            body += (f"--{boundary}\r\nContent-Disposition: {disp}\r\nContent-Type: {ctype}\r\n\r\n").encode() + payload + b"\r\n"
        body += f"--{boundary}--\r\n".encode()
        v = self._send("POST", f"/v1/models/{_quote(name)}/versions", raw=body,
                       headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}, timeout=max(self.timeout, 120))
        if v.get("sha256") != sha or v.get("size_bytes", len(data)) != len(data):
            raise errors.IntegrityError(f"the server recorded {v.get('size_bytes')} bytes with SHA-256 {v.get('sha256')}, "
                                        f"the file has {len(data)} with {sha}")
        return v

    def set_alias(self, name, alias, version):
        """Points ``name@alias`` at ``version``; the inference jobs serving ``name@alias`` roll to it.
        Returns the API's answer (the previous version, the jobs that roll)."""
        return self._send("PUT", f"/v1/models/{_quote(name)}/aliases/{_quote(alias)}", body={"version": int(version)})

    def delete_alias(self, name, alias):
        """Removes an alias; :class:`Conflict` (409) while a running job serves it."""
        return self._send("DELETE", f"/v1/models/{_quote(name)}/aliases/{_quote(alias)}")

    # ---- inference (Open Inference Protocol v2) ----

    def model_metadata(self, model):
        """The served model's OIP metadata: name, versions, platform, inputs and outputs (``GET /v2/models/{name}``)."""
        return self._send("GET", f"/v2/models/{_quote(model)}")

    def ready(self, model):
        """True when an inference job serves model ``model`` (its name: the job may serve ``name@alias`` or
        ``name@N``), False while it starts; :class:`NotFound` when no job serves it."""
        try:
            self._send("GET", f"/v2/models/{_quote(model)}/ready", retry=False)
            return True
        except errors.ServerError as e:
            if e.status == 503:
                return False
            raise

    def wait_ready(self, model, timeout=120.0, interval=0.5):
        """Waits until :meth:`ready`; :class:`WaitTimeout` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.ready(model):
            if time.monotonic() >= deadline:
                raise errors.WaitTimeout(f"model {model} not ready after {timeout:g} s")
            time.sleep(interval)

    def predict(self, model, inputs, binary=None, raw=False, parameters=None):
        """Runs model ``model`` on ``inputs`` through the inference job that serves it and returns its outputs
        as ``{output name: array}``.  ``model`` is the model's name (``/v2/models/{name}``), whichever version
        or alias the job serves (``name@alias``, ``name@N``: its ``model_version`` says which).

        ``inputs``: one array (a model with one input), or ``{input name: array}``; an array is a numpy
        array, a torch tensor, or (nested) lists, whose datatype is then the model's.  numpy arrays and
        torch tensors go as bytes through the OIP binary extension when the model is TorchScript
        (``binary=None``: decide so; ``False``: always JSON; ``True``: binary, numpy needed); lists as JSON.
        The outputs are numpy arrays when numpy can be imported, else nested lists.  ``raw=True`` returns
        the API's whole answer instead (``{"model_name", "model_version", "outputs": [{"name", "shape",
        "datatype", "data"}]}``).  :class:`RateLimited` (429) when its queue is full, :class:`ServerError`
        504 when the prediction timed out."""
        sig = self._signatures.get(model)
        if sig is None:
            sig = self._signatures[model] = self.model_metadata(model)
        tensors = oip.normalize(inputs, sig)
        use_binary = binary
        if use_binary is None:
            use_binary = sig.get("platform") == "pytorch_torchscript" and all(oip.is_array(t["value"]) for t in tensors)
        if use_binary:
            head, tail = oip.encode_binary(tensors, parameters)
            payload = head + tail
            headers = {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(head))}
            ans = self._send("POST", f"/v2/models/{_quote(model)}/infer", raw=payload, headers=headers, retry=True)
        else:
            ans = self._send("POST", f"/v2/models/{_quote(model)}/infer", body=oip.encode_json(tensors, parameters), retry=True)
        return ans if raw else oip.decode_outputs(ans)

    # ---- placement ----

    def place(self, graph, algorithms=None, name="placement", timeout=600.0, **spec):
        """Submits a placement job for ``graph`` (a dict in docs/placement.md's format, or the path of a JSON
        file holding one), waits for it and returns its result: ``best``, each candidate's figures and the
        plan (``plan``: ``{"placement": {op: device}, ...}``).  ``algorithms`` (e.g. ``["m-etf", "m-sct"]``) and the other
        members of a placement spec (``**spec``) go into the spec.  A failed job raises :class:`GantryError`
        with its error; :meth:`submit_placement` and :meth:`plan` split the two steps."""
        job = self.submit_placement(graph, algorithms=algorithms, name=name, **spec)
        return self.plan(job["id"], timeout=timeout)

    def submit_placement(self, graph, algorithms=None, name="placement", **spec):
        """Submits a placement job for ``graph`` (dict or JSON file) and returns the job at once."""
        if isinstance(graph, (str, os.PathLike)):
            with open(graph) as f:
                graph = json.load(f)
        s = {"graph": graph}
        if algorithms is not None:
            s["algorithms"] = list(algorithms)
        s.update(spec)
        return self.submit({"type": "placement", "name": name, "spec": s})

    def plan(self, job_id, timeout=600.0):
        """Waits for a placement job and returns its result (the plan); :class:`GantryError` when it failed."""
        j = self.wait(job_id, timeout=timeout)
        if j["state"] != "succeeded":
            raise errors.GantryError(f"placement job {job_id} {j['state']}: {j.get('error')}")
        return j["result"]


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass
