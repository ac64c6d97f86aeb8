"""The session's values as the API's messages, and the API's enums as the session's values."""

from __future__ import annotations

import json

from ...session.accounts.records import AccountInfo, AppUse
from ...session.audit_entries import Actor
from ...session.providers.links import ProviderLink
from ...session.providers.revocation import Revocation
from ...session.validation import (
    MAX_MIN_TTL_SECONDS,
    check_account,
    check_audience,
    check_scopes,
)
from ...states import EventKind, SignInState
from ...store.audit_rows import AuditRow
from ...v1 import broker_pb2 as pb
from ..apps.gate import AppView
from ..apps.policy import Decision
from ..callers.identity import Caller
from ..token_files import TokenFileStatus
from .statuses import InvalidRequest, checked

MAX_APP_HINT = 100  # a name and a host; the audit keeps it as said

DECISION = {
    Decision.ALLOW: pb.APP_DECISION_ALLOW,
    Decision.DENY: pb.APP_DECISION_DENY,
    Decision.ASK: pb.APP_DECISION_ASK,
}
DECISION_OF = {value: key for key, value in DECISION.items()}
DEVICE_OF = {  # None: the daemon chooses (session.signing_in.sign_ins.browser_at_hand)
    pb.SIGN_IN_METHOD_UNSPECIFIED: None,
    pb.SIGN_IN_METHOD_BROWSER: False,
    pb.SIGN_IN_METHOD_DEVICE_CODE: True,
}
# The session's states and kinds are the API's, by name (states.py); the API alone has
# UNSPECIFIED and a watch's SNAPSHOT.
SIGN_IN_STATE: dict[SignInState, pb.SignInState.ValueType] = {
    state: pb.SignInState.Value(f"SIGN_IN_STATE_{state.name}")
    for state in SignInState
    if state is not SignInState.UNSPECIFIED
}
EVENT_KIND: dict[EventKind, pb.EventKind.ValueType] = {
    kind: pb.EventKind.Value(f"EVENT_KIND_{kind.name}")
    for kind in EventKind
    if kind not in (EventKind.UNSPECIFIED, EventKind.SNAPSHOT)
}
REVOCATION = {
    None: pb.TOKEN_REVOCATION_UNSPECIFIED,
    Revocation.REVOKED: pb.TOKEN_REVOCATION_REVOKED,
    Revocation.NOT_OFFERED: pb.TOKEN_REVOCATION_NOT_OFFERED,
    Revocation.FAILED: pb.TOKEN_REVOCATION_FAILED,
}


def actor_of(caller: Caller, claimed: str = "", web_origin: str = "") -> Actor:
    """Who acts, for the audit; through a forward with hints of who is behind it.

    `web_origin`: a browser extension's request, the origin it is for.
    """
    hint = ""
    if caller.forward is not None:
        said = [f"says {claimed!r}" if claimed else "", f"peer {caller.executable or '?'}"]
        hint = ", ".join([*filter(None, said), f"pid {caller.pid}"])
    app = caller.app or f"pid {caller.pid}"
    return Actor(app=app, uid=caller.uid, pid=caller.pid, hint=hint, web_origin=web_origin)


def app_message(view: AppView, use: AppUse | None) -> pb.App:
    record, rule = view.record, view.rule
    return pb.App(
        id=record.id,
        executable=record.executable,
        script=record.script,
        decision=DECISION[rule.decision],
        decided=view.decided,
        accounts=rule.accounts,
        scopes=rule.scopes,
        last_used_unix=int(use.last_used) if use else 0,
        tokens_issued=use.tokens_issued if use else 0,
        last_pid=use.last_pid if use else 0,
        waiting=view.waiting,
        sha256=rule.sha256,
        id_token=rule.id_token,
        origins=rule.origins,
    )


def audit_event(row: AuditRow) -> pb.AuditEvent:
    return pb.AuditEvent(
        id=row.id,
        created_unix=row.created_unix,
        actor_app=row.actor_app,
        actor_uid=row.actor_uid,
        actor_pid=row.actor_pid,
        target_account=row.target_account or "",
        action=row.action,
        resource=row.resource,
        resource_id=row.resource_id or "",
        payload_json=json.dumps(row.payload, separators=(",", ":")) if row.payload else "",
        times=row.times,
        last_unix=row.last_unix or 0,
    )


def account_message(account: AccountInfo) -> pb.Account:
    return pb.Account(
        id=account.id,
        platform_user_id=account.platform_user_id,
        workspace_id=account.workspace_id,
        display_name=account.display_name,
        email=account.email,
        is_default=account.is_default,
        access_token_expires_at_unix=account.access_token_expires_at,
        next_refresh_unix=account.next_refresh_at,
        provider=account.provider,
        at_risk=account.at_risk,
        username=account.username,
        aliases=account.aliases,
        acr=account.acr,
        auth_time_unix=account.auth_time,
        dpop_bound_by=account.dpop_bound_by,
        service_account=account.service,
    )


def provider_message(link: ProviderLink) -> pb.Provider:
    device_client_id = link.device_client.client_id
    learned = link.sign_in.dpop_requirement()
    return pb.Provider(
        alias=link.alias,
        issuer=link.issuer,
        is_default=link.is_default,
        degraded_reason=link.degraded_reason,
        last_contact_unix=int(link.last_contact),
        client_id=link.client.client_id,
        device_client_id="" if link.device_client is link.client else device_client_id,
        clock_problem=link.client.clock_problem,
        setting_sources=link.setting_sources,
        dpop=link.dpop,
        dpop_required=learned is not None,
        dpop_required_since_unix=int(learned.learned_at) if learned else 0,
        dpop_required_reason=learned.reason if learned else "",
        dpop_required_until_unix=int(learned.until) if learned else 0,
        grant="client_credentials" if link.service else "authorization_code",
    )


def token_file_message(file: TokenFileStatus) -> pb.TokenFile:
    return pb.TokenFile(
        name=file.name,
        path=file.path,
        format=file.format,
        account=file.account,
        scopes=file.scopes,
        audience=file.audience,
        written_at_unix=int(file.written_at),
        next_write_unix=int(file.next_write_at),
        expires_at_unix=file.expires_at,
        problem=file.problem,
    )


def token_terms(
    request: pb.GetTokenRequest | pb.SignDpopProofRequest,
) -> tuple[str, list[str], str]:
    """The account, scopes and audience a token request names, checked with its min_ttl.

    Its app_hint (what an app behind a forward says it is) is checked too.
    """
    account = checked(check_account, request.account)
    scopes = checked(check_scopes, list(request.scopes))
    if not 0 <= request.min_ttl_seconds <= MAX_MIN_TTL_SECONDS:
        raise InvalidRequest(f"min_ttl_seconds must be between 0 and {MAX_MIN_TTL_SECONDS}")
    if len(request.app_hint) > MAX_APP_HINT or not request.app_hint.isprintable():
        raise InvalidRequest(f"app_hint must be at most {MAX_APP_HINT} printable characters")
    return account, scopes, checked(check_audience, request.audience)
