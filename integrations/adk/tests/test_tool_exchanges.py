"""A function response names the call it answers (``answers``), so that no window parts them.

The call and its response are written by separate ``append_event`` calls; a summary covering
the call must not leave the next turn's window with a response whose call is gone.
"""

from __future__ import annotations

from chronica_adk import ChronicaSessionService, SessionKey
from chronica_openai_agents import ChronicaSession
from conftest import StoreTarget
from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types
from helpers import APP, USER, fresh_id, run_on, text_event
from scripted_model import ScriptedLlm, call, say
from test_runner import request_texts, texts, user_says, weather, weather_agent

from chronica_core import ActorKind, Actum, ActumKind, AsyncStore, Span

TURN_ONE = ["What is the weather in Tirana?", "call weather", "result sunny in Tirana", "Sunny in Tirana."]


async def _turn(runner: Runner, session_id: str, question: str) -> None:
    async for _ in runner.run_async(user_id=USER, session_id=session_id, new_message=user_says(question)):
        pass


async def _acta(service: ChronicaSessionService, key: SessionKey) -> list[Actum]:
    return await service.chronicarius.get_acta(
        key.owner, key.chronicum_id, view="as_written", tool_exchanges="as_written"
    )


def test_a_summary_covering_a_call_leaves_call_and_response_together(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        model = ScriptedLlm(
            script=[call("weather", {"city": "Tirana"}, "call-1"), say("Sunny in Tirana."), say("Yes.")]
        )
        runner = Runner(agent=weather_agent(model), app_name=app, session_service=service)
        session = await service.create_session(app_name=app, user_id=USER)
        await _turn(runner, session.id, "What is the weather in Tirana?")
        key = SessionKey(app, USER, session.id)
        question, request, response, _ = await _acta(service, key)
        assert (request.kind, response.kind) == (ActumKind.TOOL_REQUEST, ActumKind.TOOL_RESPONSE)
        assert response.answers == request.id
        await service.chronicarius.record_actum(  # a summarizer covers the question and the call
            key.owner,
            Actum(
                key.chronicum_id,
                ActumKind.MESSAGE,
                ActorKind.AGENT,
                "summarizer",
                "Ardian asked for the weather in Tirana.",
                summarizes=Span(question.id, request.id),
            ),
        )
        await _turn(runner, session.id, "Sure?")
        shown = request_texts(model, 2)
        assert shown == [
            "summarizer said: Ardian asked for the weather in Tirana.",
            "call weather",
            "result sunny in Tirana",
            "Sunny in Tirana.",
            "Sure?",
        ]
        assert model.script == []

    run_on(store_target, body)


def test_a_response_answers_its_own_agents_call_in_a_chronicum_shared_with_another_framework(
    store_target: StoreTarget,
) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        key = SessionKey(app, USER, fresh_id())
        other = ChronicaSession(key.chronicum_id, service.chronicarius, owner_id=USER, actor="search")

        async def weather_and_search(city: str) -> str:
            """Tell the weather in ``city``, while another framework's agent calls a tool too."""
            await other.add_items(
                [
                    {"type": "function_call", "call_id": "call-1", "name": "search", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "call-1", "output": "found"},
                ]
            )
            return weather(city)

        model = ScriptedLlm(script=[call("weather_and_search", {"city": "Tirana"}, "call-1"), say("Sunny.")])
        agent = LlmAgent(name="concierge", model=model, tools=[weather_and_search])
        runner = Runner(agent=agent, app_name=app, session_service=service)
        await service.create_session(app_name=app, user_id=USER, session_id=key.session_id)
        await _turn(runner, key.session_id, "Weather?")
        acta = await _acta(service, key)
        assert [(actum.actor, actum.kind) for actum in acta] == [
            (USER, ActumKind.MESSAGE),
            ("concierge", ActumKind.TOOL_REQUEST),
            ("search", ActumKind.TOOL_REQUEST),
            ("search", ActumKind.TOOL_RESPONSE),
            ("concierge", ActumKind.TOOL_RESPONSE),
            ("concierge", ActumKind.MESSAGE),
        ]
        assert acta[4].answers == acta[1].id  # ADK's call, not the other framework's of the same id
        assert acta[3].answers == acta[2].id
        # the newest two acta of the shared chronicum reach back for ADK's call
        window = await service.chronicarius.get_acta(key.owner, key.chronicum_id, last_n=2)
        assert [actum.id for actum in window] == [acta[1].id, acta[4].id, acta[5].id]

    run_on(store_target, body)


def test_a_window_that_cuts_a_response_from_its_call_holds_the_call(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        app = f"app-{fresh_id()}"
        model = ScriptedLlm(script=[call("weather", {"city": "Tirana"}, "call-1"), say("Sunny in Tirana.")])
        runner = Runner(agent=weather_agent(model), app_name=app, session_service=service)
        session = await service.create_session(app_name=app, user_id=USER)
        await _turn(runner, session.id, "What is the weather in Tirana?")
        full = await service.get_session(app_name=app, user_id=USER, session_id=session.id)
        assert full is not None and texts(full.events) == TURN_ONE
        for config in (
            GetSessionConfig(num_recent_events=2),
            GetSessionConfig(after_timestamp=full.events[2].timestamp),
        ):
            got = await service.get_session(app_name=app, user_id=USER, session_id=session.id, config=config)
            assert got is not None
            assert texts(got.events) == TURN_ONE[1:], config
        got = await service.get_session(
            app_name=app, user_id=USER, session_id=session.id, config=GetSessionConfig(num_recent_events=1)
        )
        assert got is not None and texts(got.events) == TURN_ONE[3:]

    run_on(store_target, body)


def test_the_person_s_answer_to_a_long_running_call_names_the_call(store_target: StoreTarget) -> None:
    async def body(store: AsyncStore) -> None:
        service = ChronicaSessionService(store)
        session = await service.create_session(app_name=APP, user_id=USER, session_id=fresh_id())
        asked = Event(
            author="concierge",
            invocation_id="inv-1",
            content=types.Content(role="model", parts=call("approve", {"amount": 40}, "adk-approve-1")),
        )
        await service.append_event(session, asked)
        await service.append_event(session, text_event("concierge", "Waiting for your approval."))
        approved = Event(
            author="user",
            invocation_id="inv-2",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="adk-approve-1", name="approve", response={"approved": True}
                        )
                    )
                ],
            ),
        )
        await service.append_event(session, approved)
        key = SessionKey(APP, USER, session.id)
        request, _, response = await _acta(service, key)
        assert (response.actor_kind, response.kind) == (ActorKind.HUMAN, ActumKind.TOOL_RESPONSE)
        assert response.answers == request.id

    run_on(store_target, body)
