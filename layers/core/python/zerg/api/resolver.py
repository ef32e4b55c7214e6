"""Powertools' HTTP resolver with the request it is resolving kept per thread: one resolver, built
once per process, answers concurrent requests (``zerg serve``) as it answers one (Lambda).

Powertools keeps the request being resolved in shared state (aws-lambda-powertools 3.x):
``BaseRouter.current_event`` and ``BaseRouter.lambda_context`` are *class* attributes, assigned
by every ``resolve``, so they are shared by every resolver and router of the process; the routing
``context`` (the matched route, its path arguments, the ``Request``, the dependency cache) and
``processed_stack_frames`` live on the resolver; each module's ``Router`` reads all of them from
the last resolver that included it (``include_router`` sets ``router.api_resolver``). Two requests
resolved at once in two threads read each other's: another owner's session, another route's
arguments. A resolver per thread would not help (the class attributes and ``api_resolver`` stay
shared); a resolver per request would, at 2.5-5 ms per request on this machine (a fresh resolver
builds each route's models on its first call: 150-290 ms for the 61 routes, and 1.2 MB).

Invariants:
- ``current_event``, ``lambda_context``, ``context`` and ``processed_stack_frames`` are the calling
  thread's own (a ``threading.local``), so every reader (Powertools' middlewares and validation,
  the routers, the app's handlers) sees the request of its own thread. The class attribute
  Powertools still assigns in ``resolve`` is never read (this class's properties come first).
- Nothing of a request outlives it in its thread: the event and context are dropped when
  ``resolve`` returns (Powertools clears ``context``).
- Before it resolves in several threads at once, :meth:`prepare` builds what Powertools builds
  lazily, unguarded, on a route's first call: its middleware stack (check-then-wrap: two first
  calls at once wrap it twice) and its models (the dependant, the body field: two first calls
  build two sets of fields, and a reader holding one set looks up the other's: four threads
  building a fresh resolver's OpenAPI document at once failed with a KeyError in 11 to 17 of 20
  trials). ``zerg serve`` prepares it at start (:func:`zerg.local.server.make_server`, 0.15-0.3 s).
- On Lambda one thread resolves one event at a time, nothing is prepared ahead (the cold start
  builds only the routes it calls), and the behaviour is Powertools' own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent


class _PerThread:
    """A resolver attribute kept per thread, in the resolver's ``threading.local``; ``fresh`` makes
    a thread's first value when it reads before it has set one (None otherwise). A data
    descriptor: it wins over Powertools' class attribute of the same name."""

    def __init__(self, fresh: Callable[[], Any] | None = None) -> None:
        self.fresh = fresh

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, resolver: "ConcurrentResolver | None", owner: type | None = None) -> Any:
        if resolver is None:
            return self
        state = resolver._request.__dict__  # noqa: SLF001
        return state.get(self.name) if self.fresh is None else state.setdefault(self.name, self.fresh())

    def __set__(self, resolver: "ConcurrentResolver", value: Any) -> None:
        resolver._request.__dict__[self.name] = value  # noqa: SLF001


class ConcurrentResolver(APIGatewayHttpResolver):
    """An ``APIGatewayHttpResolver`` whose per-request state is per thread (see the module docstring)."""

    current_event = _PerThread()
    lambda_context = _PerThread()
    context = _PerThread(dict)
    processed_stack_frames = _PerThread(list)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._request = threading.local()  # first: Powertools' __init__ assigns context and frames
        super().__init__(*args, **kwargs)

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        raw = event.raw_event if isinstance(event, BaseProxyEvent) else event  # as Powertools accepts it
        self.current_event, self.lambda_context = self._to_proxy_event(raw), context
        try:
            return super().resolve(event, context)
        finally:
            self.current_event = self.lambda_context = None

    def prepare(self) -> None:
        """Build, for every registered route, what Powertools would build on its first call,
        unguarded (the module docstring says why). Once every router, middleware and handler is
        in; calling it again changes nothing."""
        for route in self._static_routes + self._dynamic_routes:
            if not route._middleware_stack_built:  # noqa: SLF001
                route._build_middleware_stack(router_middlewares=self._router_middlewares, app=self)  # noqa: SLF001
            _ = (route.dependant, route.body_field, route.has_dependencies)  # each property caches itself
