"""A node with security and TLS on HTTP (scripts/es-secure.sh): every ``zhdedup es`` command and a crawl as a
user holding exactly the role of README.md ("Privileges"), over https with the node's CA; each privilege of
that role taken away in turn stops the command that needs it at its start, in one line naming it; wrong
credentials, a missing CA and API keys.

The role is read from README.md, so the role users paste is the one tested.  Selected with ``-m security``;
the node starts once for this module and is stopped at its end if the module started it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT
from tests.support.es_runs import crawl_cmd
from tests.support.es_secure import SecureNode
from tests.support.helpers import serving, write_jsonl
from tests.support.zhtexts import articles, edit_chars, news_page, with_attribution

pytestmark = [pytest.mark.es, pytest.mark.security]

README = ROOT / "README.md"
USER = "zhdedup-user"
CRAWLER = "zhdedup-crawler"  # what a crawl of an installed index needs (README's table)
CRAWLER_ROLE = {"indices": [{"names": ["zhdedup-*"], "privileges": ["read", "write", "view_index_metadata"]}]}
NO_REGISTRY = "zhdedup-no-registry"  # the README's index privileges on the test indices, not on their key registries
NO_REGISTRY_ROLE = {"indices": [{"names": ["/zhdedup-sec-[0-9a-f]{10}/"],
                                 "privileges": ["read", "write", "view_index_metadata", "maintenance"]}]}
TIMEOUT = 300


def readme_role() -> dict[str, Any]:
    block = re.search(r"<!-- role:start -->\n```json\nPUT _security/role/zhdedup\n(.*?)```\n<!-- role:end -->",
                      README.read_text(encoding="utf-8"), re.S)
    assert block, "README.md has no role block"
    role: dict[str, Any] = json.loads(block.group(1))
    return role


def without(role: dict[str, Any], privilege: str) -> dict[str, Any]:
    return {"cluster": [p for p in role["cluster"] if p != privilege],
            "indices": [{**spec, "privileges": [p for p in spec["privileges"] if p != privilege]}
                        for spec in role["indices"]]}


ROLE = readme_role()
PRIVILEGES = [*ROLE["cluster"], *ROLE["indices"][0]["privileges"]]


@pytest.fixture(scope="module")
def node() -> Iterator[SecureNode]:
    secure = SecureNode()
    secure.start()
    try:
        yield secure
    finally:
        _, found = secure.request("GET", "_cat/indices/zhdedup-sec-*?format=json&h=index")
        for entry in found or []:  # by name: a wildcard delete is refused by default
            secure.request("DELETE", entry["index"])
        secure.request("DELETE", "_index_template/zhdedup-zhdedup-sec-*", ok=(200, 404))
        secure.stop()


@pytest.fixture(scope="module")
def passwords(node: SecureNode) -> dict[str, str]:
    """The README's role and a user holding it; one user per privilege holding the role without it."""
    roles = {"zhdedup": ROLE, CRAWLER: CRAWLER_ROLE, NO_REGISTRY: NO_REGISTRY_ROLE,
             **{f"zhdedup-no-{p}": without(ROLE, p) for p in PRIVILEGES}}
    users = {USER: ["zhdedup"], CRAWLER: [CRAWLER], NO_REGISTRY: [NO_REGISTRY],
             **{f"zhdedup-no-{p}": [f"zhdedup-no-{p}"] for p in PRIVILEGES}}
    return node.realm(roles, users)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = []
    for i, a in enumerate(articles(16, max_chars=900)):
        lines.append({"id": f"a{i}", "title": a.title, "text": a.text})
        if i % 2 == 0:
            lines.append({"id": f"b{i}", "title": a.title, "text": with_attribution(a.text)})
            lines.append({"id": f"c{i}", "title": a.title, "text": edit_chars(a.text, 2, i)})
    return write_jsonl(tmp_path_factory.mktemp("secure") / "corpus.jsonl", lines)


def run(node: SecureNode, user: str, password: str, *args: str | Path, ca: bool = True,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``zhdedup es …`` as ``user``: URL and credentials from the environment, the CA as ``--ca-certs``."""
    env = {"ZHDEDUP_ES_URL": node.url, "ZHDEDUP_ES_USER": user, "ZHDEDUP_ES_PASSWORD": password}
    cmd = [sys.executable, "-m", "scrapy_zhdedup.cli", "es", *map(str, args), *(["--ca-certs", node.ca] if ca else [])]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, check=False, cwd=cwd,
                          env={**_environment(), **env})


def _environment() -> dict[str, str]:
    """This process's environment without ZHDEDUP_ES_* (a developer's own must not leak into the runs)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ZHDEDUP_ES_")}


def crawl(node: SecureNode, user: str, password: str, index: str, site: str, ids: list[str], work: Path,
          **extra: Any) -> tuple[int, str, dict[str, Any] | None]:
    settings = {"ZHDEDUP_BACKEND": "elasticsearch", "ZHDEDUP_ES_URL": node.url, "ZHDEDUP_ES_INDEX": index,
                "ZHDEDUP_ES_USER": user, "ZHDEDUP_ES_PASSWORD": password, "ZHDEDUP_ES_CA_CERTS": node.ca,
                "ZHDEDUP_ES_DEAD_LETTER": work / "dead.jsonl", "ZHDEDUP_MODE": "annotate", **extra}
    work.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(crawl_cmd([f"{site}{i}.html" for i in ids], work, settings), capture_output=True, text=True,
                          timeout=TIMEOUT, check=False, cwd=work, env=_environment())
    out = work / "result.json"
    return proc.returncode, proc.stdout + proc.stderr, json.loads(out.read_text()) if out.exists() else None


@pytest.fixture(scope="module")
def site(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    root = tmp_path_factory.mktemp("site")
    records = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()][:12]
    for r in records:
        (root / f"{r['id']}.html").write_text(news_page(r["title"], r["text"]), encoding="utf-8")
    with serving(root) as base:
        yield base, [r["id"] for r in records]


def count(node: SecureNode, index: str) -> int:
    """Documents stored, all of them: refreshed first (the index refreshes on its own only once a second)."""
    node.request("POST", f"{index}/_refresh", ok=(200, 404))
    status, answer = node.request("GET", f"{index}/_count", ok=(200, 404))
    return int(answer["count"]) if status == 200 else 0


def assert_clean(output: str, *secrets: str) -> None:
    """No traceback, no third-party warning, no secret."""
    assert "Traceback" not in output and "elastic_transport" not in output and "ElasticsearchWarning" not in output, \
        output[-3000:]
    for secret in secrets:
        assert secret not in output


@pytest.fixture(scope="module")
def news(node: SecureNode, passwords: dict[str, str], corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """An index installed and filled by the README's role, for the commands that read one."""
    index = f"zhdedup-sec-{uuid.uuid4().hex[:10]}"
    work = tmp_path_factory.mktemp("news")
    assert run(node, USER, passwords[USER], "install", "--index", index).returncode == 0
    done = run(node, USER, passwords[USER], "ingest", corpus, "--index", index, "--checkpoint-dir", work / "ck")
    assert done.returncode == 0, done.stderr[-3000:]
    return index


def test_every_command_and_a_crawl_as_the_readme_role_over_https(
        node: SecureNode, passwords: dict[str, str], corpus: Path, news: str, site: tuple[str, list[str]],
        tmp_path: Path) -> None:
    password = passwords[USER]
    outputs = []

    def ok(*args: str | Path) -> str:
        proc = run(node, USER, password, *args, cwd=tmp_path)
        outputs.append(proc.stdout + proc.stderr)
        assert proc.returncode == 0, (args, proc.stderr[-3000:])
        return proc.stdout

    index = f"zhdedup-sec-{uuid.uuid4().hex[:10]}"
    assert "created" in ok("install", "--index", index, "--shards", "2")
    assert " judged (" in ok("ingest", corpus, "--index", index, "--checkpoint-dir", tmp_path / "ck")
    assert "matches:   yes" in ok("status", "--index", index)
    first = json.loads(corpus.read_text(encoding="utf-8").splitlines()[0])
    assert json.loads(ok("search", first["title"], "--index", index, "--json"))["total_hits"] >= 1
    assert "zhdedup es reconcile: " in ok("reconcile", "--index", index)
    assert "zhdedup es reconcile (dry run): " in ok("reconcile", "--index", index, "--dry-run")

    raw = f"zhdedup-sec-raw-{uuid.uuid4().hex[:10]}"  # documents another tool wrote into an installed index
    ok("install", "--index", raw)
    lines = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    for r in lines:
        node.request("POST", f"{raw}/_doc", {"url": r["id"], "text": r["text"]}, ok=(201,))
    assert f"{len(lines)} judged" in ok("dedup-index", "--index", raw, "--id-field", "url",
                                        "--checkpoint", tmp_path / "dedup.json")

    # dead letters (the index write-blocked by the admin), then replayed by the user
    more = write_jsonl(tmp_path / "more.jsonl", [{"id": f"m{i}", "text": a.text}
                                                  for i, a in enumerate(articles(4, offset=100, max_chars=900))])
    node.request("PUT", f"{index}/_settings", {"index.blocks.write": True})
    try:
        blocked = run(node, USER, password, "ingest", more, "--index", index, "--checkpoint-dir", tmp_path / "ck2",
                      "--max-retries", "0", cwd=tmp_path)
    finally:
        node.request("PUT", f"{index}/_settings", {"index.blocks.write": False})
    outputs.append(blocked.stdout + blocked.stderr)
    assert blocked.returncode != 0 and (tmp_path / "ck2" / "zhdedup-dead-letter.jsonl").exists(), blocked.stderr
    assert "4 documents of" in ok("replay", tmp_path / "ck2" / "zhdedup-dead-letter.jsonl", "--index", index)
    assert count(node, index) == len(lines) + 4

    base, ids = site
    for user in (USER, CRAWLER):  # the README's role, and the narrower one a crawl of an installed index needs
        crawled = f"zhdedup-sec-crawl-{uuid.uuid4().hex[:10]}"
        assert run(node, USER, password, "install", "--index", crawled).returncode == 0
        code, log, result = crawl(node, user, passwords[user], crawled, base, ids, tmp_path / user)
        outputs.append(log)
        assert code == 0 and result is not None and result["reason"] == "finished", log[-3000:]
        assert result["stats"]["zhdedup/judged"] == len(ids) and count(node, crawled) == len(ids)
    for output in outputs:
        assert_clean(output, password, passwords[CRAWLER])


CASES = {  # privilege -> a command that needs it (an index: "new" does not exist yet, "news" does)
    "manage_index_templates": ["install", "--index", "new"],
    "create_index": ["ingest", "CORPUS", "--index", "new"],
    "read": ["search", "新闻", "--index", "news"],
    "write": ["CRAWL", "news"],
    "view_index_metadata": ["status", "--index", "news"],
    "maintenance": ["reconcile", "--dry-run", "--index", "news"],
}


@pytest.mark.parametrize("privilege", PRIVILEGES)
def test_a_missing_privilege_stops_the_command_at_its_start_in_one_line_naming_it(
        node: SecureNode, passwords: dict[str, str], corpus: Path, news: str, site: tuple[str, list[str]],
        privilege: str, tmp_path: Path) -> None:
    user = f"zhdedup-no-{privilege}"
    command = [{"CORPUS": str(corpus), "news": news, "new": f"zhdedup-sec-new-{uuid.uuid4().hex[:8]}"}.get(a, a)
               for a in CASES[privilege]]
    kind = "cluster" if privilege in ROLE["cluster"] else "index"
    before = count(node, news)
    if command[0] == "CRAWL":
        code, log, result = crawl(node, user, passwords[user], news, site[0], site[1][:3], tmp_path)
        errors = [line for line in log.splitlines() if " ERROR: " in line]
        assert code == 0 and len(errors) == 1 and "(zhdedup_cannot_start)" in log, log[-3000:]  # README: it closes
        message = errors[0].split(" ERROR: ", 1)[1]
        assert message.startswith("zhdedup: cannot start, the crawl stops: Elasticsearch at "), log[-3000:]
        assert "Error processing" not in log and (result is None or result["scraped"] == [])
        assert_clean(log.split(" ERROR: ")[0], passwords[user])  # nothing of the client's before our line
    else:
        proc = run(node, user, passwords[user], *command, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        message = proc.stderr
        assert_clean(message, passwords[user])
    assert f"user '{user}' lacks the {kind} privilege '{privilege}'" in message, message
    assert count(node, news) == before  # stopped before anything was written
    if privilege == "create_index":
        assert count(node, command[3]) == 0 and "does not exist yet" in message


def test_the_key_registry_needs_the_same_privileges_as_its_index(node: SecureNode, passwords: dict[str, str],
                                                                  corpus: Path, news: str, tmp_path: Path) -> None:
    """A role naming the index but not ``<index>-keys`` (backend/registry.py) is refused at the start, in one
    line, before anything is written."""
    before = count(node, news)
    proc = run(node, NO_REGISTRY, passwords[NO_REGISTRY], "ingest", corpus, "--index", news,
               "--checkpoint-dir", tmp_path / "ck", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert (f"user '{NO_REGISTRY}' lacks the index privileges 'read', 'view_index_metadata', 'write' and "
            f"'maintenance' on '{news}-keys'") in proc.stderr, proc.stderr
    assert count(node, news) == before


def test_manage_is_needed_only_to_add_the_zhdedup_fields_to_an_index(node: SecureNode, passwords: dict[str, str],
                                                                       tmp_path: Path) -> None:
    """``es dedup-index`` of an index another tool made: the README's role lacks ``manage``, which adding the
    ``zhdedup`` fields to its mapping needs; it is named at the start, and nothing is judged."""
    raw = f"zhdedup-sec-foreign-{uuid.uuid4().hex[:10]}"
    node.request("PUT", raw, {"mappings": {"properties": {"text": {"type": "text"}}}})
    node.request("POST", f"{raw}/_doc?refresh=true", {"text": "国家统计局今天发布数据，十月份居民消费价格同比上涨。"},
                 ok=(201,))
    proc = run(node, USER, passwords[USER], "dedup-index", "--index", raw, "--checkpoint", tmp_path / "c.json")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert (f"user '{USER}' lacks the index privilege 'manage' on '{raw}', which es dedup-index needs to add the "
            f"zhdedup fields to the mapping of '{raw}'") in proc.stderr
    mapping = node.request("GET", f"{raw}/_mapping")[1][raw]["mappings"]
    assert "zhdedup" not in mapping.get("properties", {})
    dry = run(node, USER, passwords[USER], "dedup-index", "--index", raw, "--dry-run")  # writes nothing: no manage
    assert dry.returncode == 0, dry.stderr


def test_wrong_credentials_and_a_missing_ca_are_one_line(node: SecureNode, passwords: dict[str, str], news: str,
                                                          site: tuple[str, list[str]], tmp_path: Path) -> None:
    wrong = "not-the-password-" + uuid.uuid4().hex[:6]
    proc = run(node, USER, wrong, "status", "--index", news)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "refused the credentials (HTTP 401)" in proc.stderr
    assert_clean(proc.stderr, wrong)
    proc = run(node, USER, passwords[USER], "status", "--index", news, ca=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "failed the TLS handshake" in proc.stderr and "ZHDEDUP_ES_CA_CERTS" in proc.stderr
    assert_clean(proc.stderr, passwords[USER])
    code, log, _ = crawl(node, USER, passwords[USER], news, site[0], site[1][:2], tmp_path, ZHDEDUP_ES_CA_CERTS="")
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    assert code == 0 and len(errors) == 1 and "failed the TLS handshake" in errors[0], log[-3000:]
    assert_clean(log.split(" ERROR: ")[0], passwords[USER])


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request 401, as Elasticsearch does to a key it does not know, recording its headers."""

    seen: list[str] = []  # noqa: RUF012 - shared with the test through the class

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization", ""))
        body = b'{"error": {"type": "security_exception", "reason": "unable to authenticate"}, "status": 401}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_api_key_is_sent_as_the_authorization_header_and_a_refused_one_is_one_line(
        node: SecureNode, news: str) -> None:
    key = "em9sYWJlbDpub3QtYS1yZWFsLWtleQ=="  # base64 of id:key, as the API key API's "encoded"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = subprocess.run([sys.executable, "-m", "scrapy_zhdedup.cli", "es", "status", "--index", news, "--url",
                               f"http://127.0.0.1:{server.server_address[1]}", "--api-key", key],
                              capture_output=True, text=True, timeout=TIMEOUT, check=False, env=_environment())
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.seen and set(_Recorder.seen) == {f"ApiKey {key}"}
    assert proc.returncode == 2 and "refused the credentials (HTTP 401)" in proc.stderr
    assert_clean(proc.stderr, key)
    refused = subprocess.run([sys.executable, "-m", "scrapy_zhdedup.cli", "es", "status", "--index", news, "--url",
                              node.url, "--ca-certs", node.ca, "--api-key", key], capture_output=True, text=True,
                             timeout=TIMEOUT, check=False, env=_environment())
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "refused the credentials (HTTP 401)" in refused.stderr
    assert_clean(refused.stderr, key)
