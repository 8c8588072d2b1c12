from __future__ import annotations

import time

from memvault_sdk._base import Flow, Sleep
from memvault_sdk._errors import MemVaultTimeoutError
from memvault_sdk._request import APIRequest, returns, segment
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint
from memvault_sdk.types.jobs import Job

DEFAULT_WAIT = 300.0
DEFAULT_POLL = 0.5
MAX_POLL = 5.0


def _get(job_id: str) -> APIRequest[Job]:
    return APIRequest("GET", f"/v1/jobs/{segment(job_id)}", returns(Job))


class _Jobs(APIResource):
    @endpoint
    def get(self, job_id: str) -> APIRequest[Job]:
        """A background job: its status, progress, result once finished, and last error."""
        return _get(job_id)

    @endpoint
    def cancel(self, job_id: str, *, idempotency_key: str | None = None) -> APIRequest[Job]:
        """Cancel a job. A queued job is ``cancelled`` at once and never runs; a running one is asked
        to stop (``cancel_requested_at`` set, ``status`` still ``running``) and ends ``cancelled`` at
        its next batch, keeping what it did. Cancelling a cancelled job again is harmless; a
        succeeded or failed one raises ConflictError (``code`` ``job_finished``)."""
        return APIRequest("POST", f"/v1/jobs/{segment(job_id)}/cancel", returns(Job), idempotency_key=idempotency_key)

    @endpoint
    def wait(self, job_id: str, *, timeout: float = DEFAULT_WAIT, poll_interval: float = DEFAULT_POLL) -> Flow[Job]:
        """Poll until the job has finished (succeeded, failed or cancelled) and return it; check
        ``job.status``. Raises MemVaultTimeoutError if it has not finished within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        interval = poll_interval
        while True:
            job = yield from self._client.flow(_get(job_id))
            if job.finished:
                return job
            if time.monotonic() + interval > deadline:
                raise MemVaultTimeoutError(f"Job {job.id} was still {job.status} after {timeout:g} s.")
            yield Sleep(interval)
            interval = min(interval * 1.5, MAX_POLL)


class Jobs(_Jobs, SyncAPIResource):
    pass


class AsyncJobs(_Jobs, AsyncAPIResource):
    pass
