"""``chronica+URL`` in ADK's service registry, as ``adk web --session_service_uri`` uses it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from chronica_adk import ChronicaSessionService, register_session_services, session_service_from_url
from google.adk.cli.service_registry import ServiceRegistry
from helpers import APP, USER


def test_every_installed_backend_scheme_is_registered() -> None:
    registry = ServiceRegistry()
    schemes = register_session_services(registry, extra_schemes=["postgresql+pg8000"])
    for scheme in (
        "chronica+memory",
        "chronica+sqlite",
        "chronica+sqlite+aiosqlite",
        "chronica+postgresql",
        "chronica+postgres",
        "chronica+postgresql+psycopg",
        "chronica+mariadb+pymysql",
        "chronica+postgresql+pg8000",
    ):
        assert scheme in schemes
    assert len(schemes) == len(set(schemes))
    assert registry.create_session_service("chronica+nosuch://x") is None


def test_a_chronica_url_opens_a_service_on_the_store_after_the_prefix(tmp_path: Path) -> None:
    registry = ServiceRegistry()
    register_session_services(registry)
    url = f"chronica+sqlite:///{tmp_path / 'sessions.db'}"
    service = registry.create_session_service(url, agents_dir=str(tmp_path))
    assert isinstance(service, ChronicaSessionService)

    async def body() -> None:
        assert isinstance(service, ChronicaSessionService)
        created = await service.create_session(app_name=APP, user_id=USER, session_id="s-1")
        assert created.id == "s-1"
        await service.close()
        reopened = session_service_from_url(url)
        got = await reopened.get_session(app_name=APP, user_id=USER, session_id="s-1")
        assert got is not None and got.id == "s-1"
        await reopened.close()

    asyncio.run(body())
    assert (tmp_path / "sessions.db").exists()


def test_a_url_without_the_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="chronica\\+"):
        session_service_from_url("memory://")


def test_an_agents_folder_services_py_makes_adk_web_open_a_chronica_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.adk.cli.service_registry import load_services_module
    from google.adk.cli.utils.service_factory import create_session_service_from_options

    monkeypatch.setattr(sys, "path", list(sys.path))  # ADK puts the agents folder on it
    monkeypatch.setitem(sys.modules, "services", None)  # and imports its services.py as "services"
    del sys.modules["services"]
    (tmp_path / "services.py").write_text("import chronica_adk\n\nchronica_adk.register_session_services()\n")
    load_services_module(str(tmp_path))
    service = create_session_service_from_options(
        base_dir=tmp_path, session_service_uri=f"chronica+sqlite:///{tmp_path / 'web.db'}"
    )
    assert isinstance(service, ChronicaSessionService)

    async def body() -> None:
        assert isinstance(service, ChronicaSessionService)
        created = await service.create_session(app_name=APP, user_id=USER)
        listed = await service.list_sessions(app_name=APP, user_id=USER)
        assert [session.id for session in listed.sessions] == [created.id]
        await service.close()

    asyncio.run(body())
