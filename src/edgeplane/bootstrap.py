"""First start: an empty configuration database gets an account, an admin user, an API token and a zone (with
``localhost`` and ``127.0.0.1`` as web3 hostnames, and the managed WAF rulesets deployed as for every new zone), and
their credentials.

The credentials are written to ``<data dir>/credentials.json`` (mode 0600), the user's copy, in the formats real
tools check: a 37-character lowercase hex global API key, a 40-character API token of ``[A-Za-z0-9_-]``, and
32-character hex ids, and the admin user's dashboard password (``password``). The database keeps only hashes of the
secrets. A later start creates nothing; a data directory that has the file but an empty database (made before the
database existed) has its identity imported, and one made before the dashboard had passwords gets a password added
to the file and to the user. The file may gain keys, never lose one: keys this version does not know are kept.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from edgeplane.api.credentials import (
    new_api_key,
    new_api_token,
    new_object_id,
    new_password,
    password_hash,
    secret_hash,
)
from edgeplane.api.permissions import USER_SCOPE, permission_catalogue
from edgeplane.api.ruleset_writes import deploy_default_rulesets
from edgeplane.store.database import Database
from edgeplane.store.models import Account, ApiToken, User, Web3Hostname, Zone

BOOTSTRAP_ZONE_NAME = "localhost"
BOOTSTRAP_EMAIL = "admin@edgeplane.localhost"
# Hosts that reach the bootstrap zone's web3 gateway without any configuration.
BOOTSTRAP_WEB3_HOSTNAMES = ("localhost", "127.0.0.1")


@dataclass(frozen=True, slots=True)
class Credentials:
    """The bootstrap identity, as written to ``credentials.json``."""

    email: str
    api_key: str
    api_token: str
    account_id: str
    zone_id: str
    zone_name: str
    password: str


def ensure_bootstrap(data_dir: Path, database: Database) -> bool:
    """Creates the bootstrap identity when the database has no account. Returns whether it did.
    Raises ``OSError`` when the data directory cannot be written."""
    with database.session() as session:
        if session.scalars(select(Account)).first() is not None:
            _upgrade_bootstrap_tokens(session)
            _ensure_admin_password(data_dir, session)
            return False
        credentials, _ = ensure_credentials(data_dir)
        user_id = new_object_id()
        session.add(Account(id=credentials.account_id, name=f"{credentials.email}'s Account"))
        session.flush()
        session.add(
            User(
                id=user_id,
                email=credentials.email,
                account_id=credentials.account_id,
                api_key_hash=secret_hash(credentials.api_key),
                password_hash=password_hash(credentials.password),
            )
        )
        session.flush()
        session.add(
            ApiToken(
                id=new_object_id(),
                user_id=user_id,
                name="bootstrap token",
                value_hash=secret_hash(credentials.api_token),
                status="active",
                policies=bootstrap_policies(credentials.account_id, user_id),
            )
        )
        zone = Zone(
            id=credentials.zone_id,
            account_id=credentials.account_id,
            name=credentials.zone_name,
            plan="enterprise",
            status="active",
            type="full",
            paused=False,
        )
        session.add(zone)
        session.flush()
        deploy_default_rulesets(session, zone)
        for name in BOOTSTRAP_WEB3_HOSTNAMES:
            session.add(
                Web3Hostname(
                    id=new_object_id(),
                    zone_id=credentials.zone_id,
                    name=name,
                    target="ethereum",
                    description="bootstrap",
                    dnslink="",
                    status="active",
                )
            )
    return True


def bootstrap_policies(account_id: str, user_id: str) -> list[dict[str, object]]:
    """The bootstrap token's policies: every permission group on the account and all its zones, and the API Tokens
    groups on the user (what the global API key can do)."""
    groups = permission_catalogue().groups
    return [
        {
            "id": new_object_id(),
            "effect": "allow",
            "resources": {f"com.cloudflare.api.account.{account_id}": "*"},
            "permission_groups": [{"id": g.id, "name": g.name} for g in groups if USER_SCOPE not in g.scopes],
        },
        {
            "id": new_object_id(),
            "effect": "allow",
            "resources": {f"com.cloudflare.api.user.{user_id}": "*"},
            "permission_groups": [{"id": g.id, "name": g.name} for g in groups if USER_SCOPE in g.scopes],
        },
    ]


# The bootstrap token's only group before permission groups were enforced.
_LEGACY_BOOTSTRAP_GROUP = {"id": "bootstrap", "name": "All permissions"}


def _upgrade_bootstrap_tokens(session: Session) -> None:
    """Gives a bootstrap token made before permission groups were enforced the policies it has now (its old group
    names no permission this version knows, so it would otherwise grant nothing)."""
    for token in session.scalars(select(ApiToken).where(ApiToken.name == "bootstrap token")).all():
        policies = token.policies if isinstance(token.policies, list) else []
        legacy = [
            p for p in policies if isinstance(p, dict) and p.get("permission_groups") == [_LEGACY_BOOTSTRAP_GROUP]
        ]
        user = session.get(User, token.user_id)
        if user is None or len(legacy) != 1 or len(policies) != 1:
            continue
        if legacy[0].get("resources") != {f"com.cloudflare.api.account.{user.account_id}": "*"}:
            continue
        token.policies = bootstrap_policies(user.account_id, user.id)


def _ensure_admin_password(data_dir: Path, session: Session) -> None:
    """Gives the admin user of a data directory made before the dashboard a password: added to
    ``credentials.json`` and its hash to the user. Nothing when there is no credentials file to write it to."""
    if not (data_dir / "credentials.json").exists():
        return
    credentials, added = ensure_credentials(data_dir)
    user = session.scalars(select(User).where(User.email == credentials.email)).first()
    if user is not None and (added or user.password_hash is None):
        user.password_hash = password_hash(credentials.password)


def ensure_credentials(data_dir: Path) -> tuple[Credentials, bool]:
    """Reads ``credentials.json``, or creates the bootstrap identity and writes it; a file without a password gets
    one added (its other keys kept). Returns the credentials and whether the file was written now. Raises
    ``OSError`` when the directory cannot be written."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "credentials.json"
    if path.exists():
        document = json.loads(path.read_text(encoding="utf-8"))
        added = "password" not in document
        if added:
            document["password"] = new_password()
            _write_credentials(path, document)
        known = {name: document[name] for name in Credentials.__dataclass_fields__}
        return Credentials(**known), added
    credentials = Credentials(
        email=BOOTSTRAP_EMAIL,
        api_key=new_api_key(),
        api_token=new_api_token(),
        account_id=new_object_id(),
        zone_id=new_object_id(),
        zone_name=BOOTSTRAP_ZONE_NAME,
        password=new_password(),
    )
    _write_credentials(path, asdict(credentials))
    return credentials, True


def _write_credentials(path: Path, document: dict[str, object]) -> None:
    """Replaces ``path`` with ``document`` at once (mode 0600), so that a crash leaves the old file or the new."""
    temporary = path.with_suffix(".json.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        json.dump(document, file, indent=2)
        file.write("\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
