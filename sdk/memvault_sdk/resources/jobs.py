from __future__ import annotations

import asyncio
import time

from memvault_sdk._base import APIRequest, segment
from memvault_sdk._errors import TimeoutError
from memvault_sdk.resources._resource import AsyncAPIResource, SyncAPIResource
from memvault_sdk.types.jobs import Job

DEFAULT_WAIT = 300.0
DEFAULT_POLL = 0.5
MAX_POLL = 5.0


def _timed_out(job: Job, timeout: float) -> TimeoutError:
    return TimeoutError(f"Job {job.id} was still {job.status} after {timeout:g} s.")


class Jobs(SyncAPIResource):
    def get(self, job_id: str) -> Job:
        """A background job: its status, progress, result once finished, and last error."""
        return self._call(APIRequest("GET", f"/v1/jobs/{segment(job_id)}"), Job)

    def cancel(self, job_id: str) -> Job:
        """Cancel a job. A queued job is ``cancelled`` at once and never runs; a running one is asked
        to stop (``cancel_requested_at`` set, ``status`` still ``running``) and ends ``cancelled`` at
        its next batch, keeping what it did. Cancelling a cancelled job again is harmless; a
        succeeded or failed one raises ConflictError (``code`` ``job_finished``)."""
        return self._call(APIRequest("POST", f"/v1/jobs/{segment(job_id)}/cancel"), Job)

    def wait(self, job_id: str, *, timeout: float = DEFAULT_WAIT, poll_interval: float = DEFAULT_POLL) -> Job:
        """Poll until the job has finished (succeeded, failed or cancelled) and return it; check
        ``job.status``. Raises TimeoutError if it has not finished within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        interval = poll_interval
        while True:
            job = self.get(job_id)
            if job.finished:
                return job
            if time.monotonic() + interval > deadline:
                raise _timed_out(job, timeout)
            time.sleep(interval)
            interval = min(interval * 1.5, MAX_POLL)


class AsyncJobs(AsyncAPIResource):
    async def get(self, job_id: str) -> Job:
        """A background job: its status, progress, result once finished, and last error."""
        return await self._call(APIRequest("GET", f"/v1/jobs/{segment(job_id)}"), Job)

    async def cancel(self, job_id: str) -> Job:
        """Cancel a job. A queued job is ``cancelled`` at once and never runs; a running one is asked
        to stop (``cancel_requested_at`` set, ``status`` still ``running``) and ends ``cancelled`` at
        its next batch, keeping what it did. Cancelling a cancelled job again is harmless; a
        succeeded or failed one raises ConflictError (``code`` ``job_finished``)."""
        return await self._call(APIRequest("POST", f"/v1/jobs/{segment(job_id)}/cancel"), Job)

    # fmt: off
    async def wait(
        self, job_id: str, *, timeout: float = DEFAULT_WAIT, poll_interval: float = DEFAULT_POLL  # noqa: ASYNC109 - as in the sync client
    ) -> Job:
        # fmt: on
        """Poll until the job has finished (succeeded, failed or cancelled) and return it; check
        ``job.status``. Raises TimeoutError if it has not finished within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        interval = poll_interval
        while True:
            job = await self.get(job_id)
            if job.finished:
                return job
            if time.monotonic() + interval > deadline:
                raise _timed_out(job, timeout)
            await asyncio.sleep(interval)
            interval = min(interval * 1.5, MAX_POLL)
