"""The checkout's node with security and TLS on (scripts/es-secure.sh), and its file realm.

Users and roles of a test are written into the node's ``users``, ``users_roles`` and ``roles.yml``
(the script sets the realm to read them again a second after they change); the script's own admin
stays.  Passwords are stored hashed, as ``elasticsearch-users`` would (PBKDF2, without a JVM per user).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import ROOT
from tests.support.es_node import START_TIMEOUT_S, STOP_TIMEOUT_S, EsNodeError

SCRIPT = ROOT / "scripts" / "es-secure.sh"
RECORD = ROOT / ".cache" / "es-secure.env"
PBKDF2_ROUNDS = 10_000


def pbkdf2(password: str) -> str:
    """The file realm's ``{PBKDF2}`` hash of ``password`` (PBKDF2-HMAC-SHA512, 32-byte salt and key)."""
    salt = os.urandom(32)
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, PBKDF2_ROUNDS, 32)
    return f"{{PBKDF2}}{PBKDF2_ROUNDS}${base64.b64encode(salt).decode()}${base64.b64encode(key).decode()}"


@dataclass
class SecureNode:
    url: str = ""
    ca: str = ""
    admin: tuple[str, str] = ("", "")
    config: Path = Path()
    started_here: bool = False
    _users: dict[str, str] = field(default_factory=dict)  # test user -> password

    def _script(self, command: str, timeout: float) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=timeout,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            raise EsNodeError(f"{SCRIPT} {command} did not finish within {timeout:.0f}s") from exc

    def start(self) -> None:
        self.started_here = self._script("status", 60).returncode != 0
        proc = self._script("start", START_TIMEOUT_S)
        if proc.returncode != 0:
            raise EsNodeError(f"{SCRIPT} start failed:\n{proc.stderr.strip()[-3000:]}")
        record = dict(line.split("=", 1) for line in RECORD.read_text().splitlines() if "=" in line)
        self.url, self.ca = record["ZHDEDUP_ES_URL"], record["ZHDEDUP_ES_CA_CERTS"]
        self.admin = (record["ZHDEDUP_ES_ADMIN_USER"], record["ZHDEDUP_ES_ADMIN_PASSWORD"])
        self.config = Path(record["ZHDEDUP_ES_NODE_DIR"]) / "config"

    def stop(self) -> None:
        if self.started_here:
            self._script("stop", STOP_TIMEOUT_S)

    def realm(self, roles: dict[str, dict[str, Any]], users: dict[str, list[str]]) -> dict[str, str]:
        """Replace the test roles and users (``users``: name -> roles; the admin stays); returns each
        user's password, once all of them authenticate."""
        passwords = {name: secrets.token_urlsafe(18) for name in users}
        admin = self.admin[0]
        kept = [line for line in (self.config / "users").read_text().splitlines() if line.startswith(f"{admin}:")]
        by_role: dict[str, list[str]] = {"superuser": [admin]}
        for name, names in users.items():
            for role in names:
                by_role.setdefault(role, []).append(name)
        self._write("roles.yml", "".join(f"{name}: {json.dumps(role)}\n" for name, role in roles.items()))
        self._write("users_roles", "".join(f"{role}:{','.join(members)}\n" for role, members in by_role.items()))
        self._write("users", "\n".join([*kept, *(f"{n}:{pbkdf2(p)}" for n, p in passwords.items())]) + "\n")
        deadline = time.monotonic() + 60
        for name, password in passwords.items():  # read again within a second of the change
            while self.request("GET", "_security/_authenticate", auth=(name, password), ok=(200, 401))[0] != 200:
                if time.monotonic() > deadline:
                    raise EsNodeError(f"the file realm did not take user {name} within 60 s")
                time.sleep(0.2)
        return passwords

    def _write(self, name: str, text: str) -> None:
        """Atomically: the node must never read half a file."""
        tmp = self.config / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.config / name)

    def request(self, method: str, path: str, body: Any = None, *, auth: tuple[str, str] | None = None,
                ok: tuple[int, ...] = (200,)) -> tuple[int, Any]:
        """One request as ``auth`` (default: the admin); returns the status and the decoded answer."""
        user, password = auth or self.admin
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}/{path}", data=data, method=method, headers={
            "Content-Type": "application/json",
            "Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()})
        context = ssl.create_default_context(cafile=self.ca)
        try:
            with urllib.request.urlopen(request, timeout=60, context=context) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        if status not in ok:
            raise EsNodeError(f"{method} {path} as {user}: HTTP {status}: {raw[:500]!r}")
        return status, json.loads(raw) if raw else None
