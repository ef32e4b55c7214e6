"""Where this process runs: on AWS Lambda, or anywhere else. Decided here, and only here.

Invariants:
- Each question is answered on the side that is safe for the code asking it:
  - :func:`lambda_environment`: the Lambda runtime's own variables (``AWS_LAMBDA_FUNCTION_NAME``,
    ``AWS_LAMBDA_RUNTIME_API``, ``LAMBDA_TASK_ROOT``) are all set and this process hosts no local
    engine. Used to skip the sandbox probe (Lambda has no namespaces) and by ``zerg doctor``.
  - :func:`lambda_runtime`: that, and this process is the runtime itself, right under Lambda's
    init (its parent is PID 1, and it has no other ancestor). Only then may the end of a worker
    invocation kill every other process it can signal (:mod:`zerg.sandbox.invocation`): anywhere
    else that would kill the user's own programs.
  - :func:`may_be_lambda`: any one of those variables is set. Used where believing "Lambda" is
    the cautious choice (refusing a local key file that would not outlive the container).
- A process that has built a local engine (:mod:`zerg.local.engine` runs the handlers in threads
  of a long-lived process, next to the API and the database) is never Lambda, whatever its
  environment says.
"""

from __future__ import annotations

import os

from zerg.config import Settings

_local_engine = False


def mark_local_engine() -> None:
    """Called by the local engine: from now on this process is never taken for Lambda."""
    global _local_engine
    _local_engine = True


def may_be_lambda(settings: Settings) -> bool:
    return bool(settings.lambda_function_name or settings.lambda_runtime_api or settings.lambda_task_root)


def lambda_environment(settings: Settings) -> bool:
    return (not _local_engine and bool(settings.lambda_function_name) and bool(settings.lambda_runtime_api)
            and bool(settings.lambda_task_root))


def lambda_runtime(settings: Settings) -> bool:
    return lambda_environment(settings) and os.getppid() == 1
