"""``/api/config*``: the Settings dialog's routes over ``config.json`` (UI-internal, not stable API).

Mounted only when the app has a :class:`~lovia.web.config.ConfigRuntime` (``lovia web`` without
``--app``). Keys are write-only: reads carry ``{set, hint}``; on a write ``null`` keeps the stored
key and ``""`` clears it. A stored key only ever goes to the URL it was saved with: a write or a
connection test that changes the URL while keeping the key is refused (422) until the key is sent again.
Every write builds the whole new document, validates it, saves it
atomically and swaps the served agent (``config_changed`` on ``/api/events``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field, ValidationError

from ...exceptions import UserError
from ..auth import is_authenticated, is_loopback, split_host
from ..config import ConfigRuntime, Connection, ModelProfile, WebConfig, mask_key, scan_skills_status, slugify
from ..config.probe import known_context_window, unlisted_model_note, validate_connection
from ..config.schema import FlavorName, SearchBackend, VisionMode
from ..errors import ApiRoute, WebError

__all__ = ["ProfileIn", "RolesIn", "SearchIn", "SkillsIn", "TestIn", "TestOut", "build_config_router"]

_ID = r"^[a-z0-9][a-z0-9._-]*$"


class ProfileIn(BaseModel):
    """A profile as the page sends it (``api_key``: ``None`` keeps the stored key, ``""`` clears it)."""

    id: str | None = Field(default=None, pattern=_ID, max_length=64)
    name: str | None = None
    model: str = Field(min_length=1)
    flavor: FlavorName = "openai"
    base_url: str | None = None
    api_key: str | None = None
    context_window: int | None = Field(default=None, ge=1)
    vision: VisionMode = "auto"
    extra_body: dict[str, Any] = Field(default_factory=dict)

    def to_profile(self, *, profile_id: str, stored_key: str | None) -> ModelProfile:
        """The stored profile: this input under ``profile_id``, keeping ``stored_key`` unless a key was sent.

        Raises:
            pydantic.ValidationError: A field the document does not accept (a reserved extra field, a bad URL).
        """
        key = stored_key if self.api_key is None else (self.api_key or None)
        data = self.model_dump(exclude={"id", "api_key"})
        return ModelProfile.model_validate({**data, "id": profile_id, "api_key": key})


class RolesIn(BaseModel):
    """Which profile answers the chat, describes images, and does auxiliary calls."""

    chat: str | None = None
    vision: str | None = None
    aux: str | None = None


class SearchIn(BaseModel):
    """The search backend (``None`` keeps it) and the Tavily key (``None`` keeps, ``""`` clears)."""

    backend: SearchBackend | None = None
    tavily_api_key: str | None = None


class SkillsIn(BaseModel):
    """The ordered skill directories."""

    dirs: list[str]


class TestIn(BaseModel):
    """A connection to test: a stored profile (``profile_id``), optionally with fields overridden."""

    __test__ = False  # not a pytest test class

    profile_id: str | None = None
    model: str | None = None
    flavor: FlavorName = "openai"
    base_url: str | None = None
    api_key: str | None = None
    context_window: int | None = None


class TestOut(BaseModel):
    """The verdict of a connection test."""

    __test__ = False

    outcome: Literal["ok", "auth_failed", "unreachable", "unverifiable"]
    detail: str
    context_window: int | None = None
    window_from_endpoint: bool = False
    models: list[str] | None = None
    note: str | None = None


def _key_view(key: str | None) -> dict[str, Any]:
    return {"set": bool(key), "hint": mask_key(key) if key else None}


def _profile_view(profile: ModelProfile, runtime: ConfigRuntime, config: WebConfig) -> dict[str, Any]:
    view = profile.model_dump(mode="json", exclude={"api_key"})
    view["api_key"] = _key_view(profile.api_key)
    view["display_name"] = profile.display_name
    view["usable"] = profile.id in runtime.serveable(config)
    return view


def config_view(runtime: ConfigRuntime) -> dict[str, Any]:
    """``GET /api/config``: the document without any key, plus where it lives and what is served."""
    config = runtime.config
    default = config.default_profile()
    return {
        "version": config.version,
        "path": str(runtime.loaded.path),
        "scope": runtime.loaded.label,
        "exists": runtime.loaded.exists,
        "configured": runtime.configured,
        "default_model": default.id if default is not None else None,
        "model_from_outside": runtime.model_from_outside,
        "models": [_profile_view(m, runtime, config) for m in config.models],
        "roles": config.roles.model_dump(mode="json"),
        "search": {"backend": config.search.backend, "tavily_api_key": _key_view(config.search.tavily_api_key)},
        "skills": config.skills.model_dump(mode="json"),
    }


def _invalid(exc: ValidationError | UserError) -> WebError:
    if isinstance(exc, UserError):
        return WebError(422, "invalid_request", exc.message, hint=exc.hint)
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "configuration"
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    return WebError(422, "invalid_request", f"{where}: {message}", hint="fix the field and save again")


def _not_found(profile_id: str, config: WebConfig) -> WebError:
    known = ", ".join(m.id for m in config.models) or "none yet"
    return WebError(404, "model_not_found", f"no model profile {profile_id!r}", hint=f"profiles: {known}")


def _local_writes(request: Request) -> None:
    """Config writes without a token must come from this machine (keys are at stake)."""
    if is_authenticated(request):
        return  # the app's token (or auth=) check let it in; a bare Authorization header does not
    name, _port = split_host(request.headers.get("host") or "")
    if not (name and is_loopback(name)):
        raise WebError(
            403,
            "local_origin_required",
            "configuration changes without a token are only accepted from this machine",
            hint="open the page on localhost, or start the server with --token",
        )


class _Editor:
    """Serialises read-edit-validate-apply cycles over one runtime (no lost updates)."""

    def __init__(self, runtime: ConfigRuntime) -> None:
        self.runtime = runtime
        self.lock = asyncio.Lock()

    async def change(self, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Edit a copy of the document, validate all of it, then save and switch."""
        async with self.lock:
            data = self.runtime.config.model_dump(mode="python")
            edit(data)
            try:
                config = WebConfig.model_validate(data)
                await self.runtime.apply(config)
            except (ValidationError, UserError) as exc:
                raise _invalid(exc) from None
            return config_view(self.runtime)

    def stored(self, profile_id: str) -> ModelProfile:
        """The stored profile, or 404 ``model_not_found``."""
        found = self.runtime.config.profile(profile_id)
        if found is None:
            raise _not_found(profile_id, self.runtime.config)
        return found


def _profile_from(body: ProfileIn, profile_id: str, stored_key: str | None) -> ModelProfile:
    try:
        return body.to_profile(profile_id=profile_id, stored_key=stored_key)
    except ValidationError as exc:
        raise _invalid(exc) from None


def _replace_profile(profile: ModelProfile) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        data["models"] = [profile.model_dump(mode="python") if m["id"] == profile.id else m for m in data["models"]]

    return edit


def _drop_profile(profile_id: str) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        data["models"] = [m for m in data["models"] if m["id"] != profile_id]
        for role in ("vision", "aux"):
            if data["roles"].get(role) == profile_id:
                data["roles"][role] = None

    return edit


def _model_routes(router: APIRouter, ed: _Editor, writes: list[Any]) -> None:
    runtime = ed.runtime

    @router.post("/models", status_code=201, dependencies=writes)
    async def add_model(body: ProfileIn) -> dict[str, Any]:
        taken = {m.id for m in runtime.config.models}
        profile_id = body.id or slugify(body.name or body.model, taken)
        if profile_id in taken:
            raise WebError(
                409, "model_exists", f"a model profile {profile_id!r} exists", hint="pick another id, or edit that one"
            )
        profile = _profile_from(body, profile_id, None)
        return await ed.change(lambda data: data["models"].append(profile.model_dump(mode="python")))

    @router.put("/models/{profile_id}", dependencies=writes)
    async def edit_model(profile_id: str, body: ProfileIn) -> dict[str, Any]:
        stored = ed.stored(profile_id)
        if body.id is not None and body.id != profile_id:
            raise WebError(
                422, "invalid_request", "a profile's id cannot be changed", hint="duplicate it under the new id instead"
            )
        updated = _profile_from(body, profile_id, stored.api_key)
        if body.api_key is None:
            _key_stays_home(stored, Connection.from_profile(updated).root, "save")
        return await ed.change(_replace_profile(updated))

    @router.post("/models/{profile_id}/duplicate", status_code=201, dependencies=writes)
    async def duplicate_model(profile_id: str) -> dict[str, Any]:
        stored = ed.stored(profile_id)
        copy_id = slugify(f"{profile_id}-copy", {m.id for m in runtime.config.models})
        copy = stored.model_copy(
            update={"id": copy_id, "name": f"{stored.display_name} (copy)"}
        )  # key stays server-side
        return await ed.change(lambda data: data["models"].append(copy.model_dump(mode="python")))

    @router.delete("/models/{profile_id}", dependencies=writes)
    async def delete_model(profile_id: str) -> dict[str, Any]:
        ed.stored(profile_id)
        default = runtime.config.default_profile()
        if default is not None and default.id == profile_id:
            raise WebError(
                409,
                "model_in_use",
                f"{profile_id!r} is the default chat model",
                hint="make another profile the chat model first",
            )
        return await ed.change(_drop_profile(profile_id))


def _settings_routes(router: APIRouter, ed: _Editor, writes: list[Any]) -> None:
    runtime = ed.runtime

    @router.get("")
    async def get_config() -> dict[str, Any]:
        return config_view(runtime)

    @router.put("/roles", dependencies=writes)
    async def set_roles(body: RolesIn) -> dict[str, Any]:
        return await ed.change(lambda data: data.update(roles=body.model_dump()))

    @router.put("/search", dependencies=writes)
    async def set_search(body: SearchIn) -> dict[str, Any]:
        def edit(data: dict[str, Any]) -> None:
            if body.backend is not None:
                data["search"]["backend"] = body.backend
            if body.tavily_api_key is not None:
                data["search"]["tavily_api_key"] = body.tavily_api_key.strip() or None

        return await ed.change(edit)

    async def skills_view() -> dict[str, Any]:
        roots = await asyncio.to_thread(scan_skills_status, runtime.config.skills)
        return {"dirs": list(runtime.config.skills.dirs), "roots": [asdict(r) for r in roots]}

    @router.get("/skills")
    async def get_skills() -> dict[str, Any]:
        return await skills_view()

    @router.put("/skills", dependencies=writes)
    async def set_skills(body: SkillsIn) -> dict[str, Any]:
        await ed.change(lambda data: data.update(skills={"dirs": body.dirs}))
        return await skills_view()


def _key_stays_home(stored: ModelProfile, destination: str, action: str) -> None:
    """Refuse (422) to send ``stored``'s key anywhere but the URL it was saved with.

    A stored key is write-only: whoever can edit the settings must not be able to read it by
    pointing its profile (or a connection test) at a server of theirs.
    """
    if stored.api_key and destination != Connection.from_profile(stored).root:
        raise WebError(
            422,
            "invalid_request",
            f"the stored API key of {stored.id!r} is only sent to {Connection.from_profile(stored).root}, "
            f"not to {destination}",
            hint=f"type the API key again to {action} with the new URL (or clear it with an empty key)",
        )


def _test_connection(body: TestIn, ed: _Editor) -> Connection:
    """The connection a test probes: the stored profile, with what the form overrides.

    The stored key goes only to the stored profile's own URL: a test toward another URL needs the key sent along.
    """
    stored = ed.stored(body.profile_id) if body.profile_id else None
    conn = Connection.from_profile(stored) if stored is not None else Connection()
    if body.model is not None:
        conn.model = f"{body.flavor}:{body.model.strip()}"
    if body.base_url is not None:
        conn.base_url = body.base_url.strip() or None
    if body.api_key is not None:
        conn.api_key = body.api_key or None
    if body.context_window is not None:
        conn.context_window = body.context_window
    if not conn.model_id:
        raise WebError(422, "invalid_request", "nothing to test: no model", hint="send profile_id or model")
    if stored is not None and body.api_key is None:
        _key_stays_home(stored, conn.root, "test")
    return conn


def build_config_router(runtime: ConfigRuntime) -> APIRouter:
    """The ``/api/config*`` routes over ``runtime``."""
    router = APIRouter(prefix="/api/config", route_class=ApiRoute)
    writes: list[Any] = [Depends(_local_writes)]
    ed = _Editor(runtime)
    _settings_routes(router, ed, writes)
    _model_routes(router, ed, writes)

    @router.post("/test", dependencies=writes)
    async def test_connection(body: TestIn) -> TestOut:
        conn = _test_connection(body, ed)
        outcome, detail = await asyncio.to_thread(validate_connection, conn)
        return TestOut(
            outcome=outcome.value,
            detail=detail,
            context_window=known_context_window(conn),
            window_from_endpoint=conn.window_from_endpoint,
            models=conn.available_models,
            note=unlisted_model_note(conn),
        )

    return router
