# The in-process app (jobs on the server's threads) of the job tests.
from tests.jobs.conftest import inproc, inproc_app  # noqa: F401
