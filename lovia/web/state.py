"""``WebState``: the name the routes use for :class:`lovia.web.api.deps.RouterDeps`.

The app builds one ``RouterDeps`` and every router reads it; the routes import this name only
for type checking, so they never import the app (or the API package) that imports them.
"""

from __future__ import annotations

from .api.deps import RouterDeps

__all__ = ["WebState"]

WebState = RouterDeps
"""What every route needs: the store, the supervisor, the agents and the run settings."""
