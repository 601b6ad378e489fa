"""The Gantry REST API from Python, standard library only: Client (blocking) and AsyncClient."""

import asyncio
import json
import os
import shlex
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .errors import GantryError, GantryUnreachable
from .models import Job

DURATION_FIELDS = ("estimated_duration", "time_limit", "hold_gpus")


def _utc(when: Union[str, datetime]) -> str:
    if isinstance(when, str):
        return when
    if when.tzinfo is None:
        when = when.astimezone()  # a naive datetime is local time
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _spec(command, fields: Dict[str, Any]) -> Dict[str, Any]:
    """A job spec from keyword fields: a command list is shell-quoted, durations given as
    numbers (seconds) or timedeltas go as FIELD_s, None means not given."""
    spec = {k: v for k, v in fields.items() if v is not None}
    if command is not None:
        spec["command"] = command if isinstance(command, str) else shlex.join(command)
    for key in DURATION_FIELDS:
        value = spec.get(key)
        if isinstance(value, timedelta):
            value = value.total_seconds()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            del spec[key]
            spec[key + "_s"] = value
    return spec


class Client:
    """A connection to a Gantry server. The server and token come from the arguments, else
    GANTRY_SERVER, GANTRY_TOKEN and GANTRY_TOKEN_FILE, else http://127.0.0.1:8080."""

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None,
                 token_file: Optional[str] = None, ca_cert: Optional[str] = None,
                 timeout: float = 30.0):
        self.server = (server or os.environ.get("GANTRY_SERVER") or "http://127.0.0.1:8080").rstrip("/")
        self.token = token or os.environ.get("GANTRY_TOKEN") or ""
        path = token_file or (os.environ.get("GANTRY_TOKEN_FILE") if not self.token else None)
        if path:
            try:
                with open(os.path.expanduser(path), encoding="utf-8") as f:
                    self.token = f.read().strip()
            except OSError as e:
                raise GantryError(0, f"cannot read the token file {path}: {e.strerror}", field="token_file")
            if not self.token:
                raise GantryError(0, f"the token file {path} is empty", field="token_file")
        self.timeout = timeout
        self._ssl = ssl.create_default_context(cafile=ca_cert) if ca_cert else None

    # -- transport -------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, params: Optional[Dict[str, Any]] = None,
                headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], bytes]:
        """One HTTP request; answers (status, headers, body) for 2xx, raises GantryError else."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        url = self.server + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None
        all_headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        all_headers.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as res:
                return res.status, dict(res.headers), res.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                err = json.loads(raw)["error"]
                raise GantryError(e.code, err.get("message", ""), err.get("code", ""), err.get("field", "")) from None
            except (ValueError, KeyError, TypeError):
                raise GantryError(e.code, raw.decode(errors="replace").strip() or e.reason) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise GantryUnreachable(f"cannot reach {self.server}: {reason}") from None

    def _json(self, method: str, path: str, body: Any = None, params: Optional[Dict[str, Any]] = None,
              headers: Optional[Dict[str, str]] = None) -> Any:
        return json.loads(self.request(method, path, body, params, headers)[2])

    def _post_retried(self, path: str, body: Any, key: str, params: Optional[Dict[str, Any]] = None) -> Any:
        """A POST that makes something, retried through lost connections with one Idempotency-Key."""
        for attempt in range(3):
            try:
                return self._json("POST", path, body, params, {"Idempotency-Key": key})
            except GantryUnreachable:
                if attempt == 2:
                    raise
                time.sleep(0.2 * 2 ** attempt)
        raise AssertionError("unreachable")

    # -- jobs ------------------------------------------------------------------------------

    def submit(self, command: Union[str, Sequence[str], None] = None, *, idempotency_key: Optional[str] = None,
               **fields: Any) -> Job:
        """Submits one job. `fields` are the job's fields as the API names them (gpus,
        gpu_types, gpu_fraction, estimated_duration, time_limit, cost_limit, env, notify, ...);
        durations take "2h", a number of seconds or a timedelta. Returns the job as made."""
        key = idempotency_key or uuid.uuid4().hex
        return Job.from_json(self._post_retried("/v1/jobs", _spec(command, fields), key))

    def submit_array(self, command: Union[str, Sequence[str]], array: str, **fields: Any) -> Job:
        """A job array ("0-99%8"): the answer is the first task, with `array` counts."""
        return self.submit(command, array=array, **fields)

    def submit_batch(self, specs: List[Dict[str, Any]], idempotency_key: Optional[str] = None) -> List[Job]:
        """Several jobs, made all or none (POST /v1/jobs/batch)."""
        key = idempotency_key or uuid.uuid4().hex
        answer = self._post_retried("/v1/jobs/batch", {"jobs": [_spec(None, s) for s in specs]}, key)
        return [Job.from_json(j) for j in answer["jobs"]]

    def dry_run(self, specs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """What submitting `specs` would do now, per job; makes nothing."""
        body = {"jobs": [_spec(None, s) for s in specs]}
        return self._json("POST", "/v1/jobs/batch", body, {"dry_run": "true"})["jobs"]

    def get(self, job_id: str) -> Job:
        return Job.from_json(self._json("GET", f"/v1/jobs/{job_id}"))

    def jobs(self, state: Optional[str] = None, team: Optional[str] = None, user: Optional[str] = None,
             since: Union[str, datetime, None] = None, until: Union[str, datetime, None] = None,
             limit: Optional[int] = None) -> List[Job]:
        """Jobs the caller may see, newest first."""
        params = {"state": state, "team": team, "user": user, "limit": limit,
                  "since": _utc(since) if since else None, "until": _utc(until) if until else None}
        return [Job.from_json(j) for j in self._json("GET", "/v1/jobs", params=params)["jobs"]]

    list = jobs

    def cancel(self, job_id: str) -> Job:
        return Job.from_json(self._json("DELETE", f"/v1/jobs/{job_id}"))

    def hold(self, job_id: str) -> Job:
        return Job.from_json(self._json("POST", f"/v1/jobs/{job_id}/hold"))

    def release(self, job_id: str) -> Job:
        return Job.from_json(self._json("POST", f"/v1/jobs/{job_id}/release"))

    def update(self, job_id: str, **changes: Any) -> Job:
        """Changes a pending job's fields (a running one's time_limit)."""
        return Job.from_json(self._json("PATCH", f"/v1/jobs/{job_id}", _spec(None, changes)))

    def events(self, job_id: str) -> List[Dict[str, Any]]:
        return self._json("GET", f"/v1/jobs/{job_id}/events")["events"]

    def wait(self, job_ids: Union[str, Sequence[str]], timeout: Optional[float] = None,
             poll_interval: float = 1.0) -> List[Job]:
        """Blocks until every job has ended; raises TimeoutError after `timeout` seconds."""
        ids = [job_ids] if isinstance(job_ids, str) else list(job_ids)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            jobs = [self.get(i) for i in ids]
            if all(j.done for j in jobs):
                return jobs
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"jobs still running after {timeout} s: "
                                   + ", ".join(j.id for j in jobs if not j.done))
            time.sleep(poll_interval)

    def logs(self, job_id: str, stream: str = "stdout", offset: int = 0, rank: int = 0,
             run: Optional[int] = None) -> str:
        """A job's output from `offset` (up to 1 MiB per call): one rank (a multi-node job's
        node rank) of one run (default: the latest)."""
        return self._log_chunk(job_id, stream, offset, rank, run)[0]

    def _log_chunk(self, job_id: str, stream: str, offset: int, rank: int = 0,
                   run: Optional[int] = None) -> Tuple[str, int, str, int]:
        _, headers, body = self.request("GET", f"/v1/jobs/{job_id}/logs",
                                        params={"stream": stream, "offset": offset, "rank": rank, "run": run})
        lower = {k.lower(): v for k, v in headers.items()}
        return body.decode(errors="replace"), int(lower.get("x-log-offset", offset + len(body))), \
            lower.get("x-job-state", ""), int(lower.get("x-log-run", run or 0))

    def follow_logs(self, job_id: str, stream: str = "stdout", poll_interval: float = 0.5,
                    rank: int = 0) -> Iterator[str]:
        """Yields one rank's output as it comes, until the job has ended and all is read; a
        requeued job's next run is followed from its start."""
        offset, run = 0, 0
        while True:
            chunk, next_offset, state, served = self._log_chunk(job_id, stream, offset, rank)
            if served != run:  # a new run: its output starts at 0
                offset, run = 0, served
                continue
            offset = next_offset
            if chunk:
                yield chunk
                continue
            if state in ("succeeded", "failed", "cancelled"):
                return
            time.sleep(poll_interval)

    # -- the cluster and the bill ----------------------------------------------------------

    def queue(self) -> Dict[str, Any]:
        return self._json("GET", "/v1/queue")

    def nodes(self) -> List[Dict[str, Any]]:
        return self._json("GET", "/v1/nodes")["nodes"]

    def cluster(self) -> Dict[str, Any]:
        return self._json("GET", "/v1/cluster")

    def usage(self, from_: Optional[str] = None, to: Optional[str] = None, by: Optional[str] = None,
              team: Optional[str] = None) -> Dict[str, Any]:
        """GPU-hours and cost over a window (dates as YYYY-MM-DD), grouped `by` team, project,
        user, gpu_type or job."""
        return self._json("GET", "/v1/usage", params={"from": from_, "to": to, "by": by, "team": team})

    def report(self, month: Optional[str] = None, format: str = "json") -> Union[Dict[str, Any], str]:
        """The monthly bill: a dict for json, the text for csv, html or text."""
        _, _, body = self.request("GET", "/v1/reports/monthly", params={"month": month, "format": format})
        return json.loads(body) if format == "json" else body.decode()

    def budgets(self) -> List[Dict[str, Any]]:
        return self._json("GET", "/v1/budgets")["budgets"]

    def alerts(self) -> List[Dict[str, Any]]:
        return self._json("GET", "/v1/alerts")["alerts"]

    def whoami(self) -> Dict[str, Any]:
        return self._json("GET", "/v1/whoami")


class AsyncClient:
    """The same calls for asyncio: each runs the blocking call in a worker thread, so an
    event loop is never blocked; follow_logs is an async iterator."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.sync = Client(*args, **kwargs)

    def __getattr__(self, name: str):
        call = getattr(self.sync, name)
        if not callable(call) or name == "follow_logs":
            return call

        async def run(*args: Any, **kwargs: Any):
            return await asyncio.to_thread(call, *args, **kwargs)

        return run

    async def wait(self, job_ids: Union[str, Sequence[str]], timeout: Optional[float] = None,
                   poll_interval: float = 1.0) -> List[Job]:
        ids = [job_ids] if isinstance(job_ids, str) else list(job_ids)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            jobs = list(await asyncio.gather(*(asyncio.to_thread(self.sync.get, i) for i in ids)))
            if all(j.done for j in jobs):
                return jobs
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError(f"jobs still running after {timeout} s")
            await asyncio.sleep(poll_interval)

    async def follow_logs(self, job_id: str, stream: str = "stdout", poll_interval: float = 0.5, rank: int = 0):
        offset, run = 0, 0
        while True:
            chunk, next_offset, state, served = await asyncio.to_thread(self.sync._log_chunk, job_id, stream, offset,
                                                                        rank)
            if served != run:  # a new run: its output starts at 0
                offset, run = 0, served
                continue
            offset = next_offset
            if chunk:
                yield chunk
                continue
            if state in ("succeeded", "failed", "cancelled"):
                return
            await asyncio.sleep(poll_interval)
