"""The node's configuration: agents and tokens, capability groups, policy, the environment over the file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kitsune.config import load_config
from messages.errors import KitsuneError


def test_agents_come_from_the_file_and_the_environment_and_only_token_hashes_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text("agents:\n  - {name: a, token: aaaaaaaaaaaaaaaa1}\n  - {name: b, token_env: B_TOKEN}\n")
    config = load_config(path, {"B_TOKEN": "bbbbbbbbbbbbbbbb2", "KITSUNE_AGENTS": "c=cccccccccccccccc3"})
    assert [a.name for a in config.agents] == ["a", "b", "c"]
    assert config.agents[1].token_sha256 == hashlib.sha256(b"bbbbbbbbbbbbbbbb2").digest()
    assert "bbbbbbbbbbbbbbbb2" not in repr(config)
    assert config.generated_token is None


def test_with_no_agent_a_default_agent_gets_a_generated_token() -> None:
    config = load_config(None, {})
    assert [a.name for a in config.agents] == ["default"]
    assert config.generated_token and len(config.generated_token) >= 32
    assert config.agents[0].token_sha256 == hashlib.sha256(config.generated_token.encode()).digest()


def test_caps_default_to_core_and_the_environment_chooses_them() -> None:
    assert load_config(None, {}).policy.caps == {"core"}
    assert load_config(None, {"KITSUNE_CAPS": "core,automation"}).policy.caps == {"core", "automation"}


@pytest.mark.parametrize(("text", "env", "wrong"), [
    ("agents: [{name: a, token: short}]", {}, "at least 16"),
    ("agents: [{name: a, token_env: MISSING}]", {}, "MISSING"),
    ("agents: [{name: a, token: aaaaaaaaaaaaaaaa}, {name: a, token: bbbbbbbbbbbbbbbb}]", {}, "unique"),
    ("caps: [core, everything]", {}, "everything"),
    ("read_only: perhaps", {}, "read_only"),
    ("fleet: 'a b'", {}, "fleet"),
    ("- not an object", {}, "object"),
])
def test_a_bad_configuration_is_refused_naming_what_is_wrong(tmp_path: Path, text: str, env: dict[str, str],
                                                              wrong: str) -> None:
    path = tmp_path / "k.yaml"
    path.write_text(text)
    with pytest.raises(KitsuneError) as caught:
        load_config(path, env)
    assert caught.value.code == "invalid_config" and wrong in caught.value.message


@pytest.mark.parametrize(("text", "path"), [
    ("readonly: true", "readonly"),
    ("agents: [{name: a, token: aaaaaaaaaaaaaaaa, readonly: true}]", "agents.0.readonly"),
    ("urls: {allow: [a], denied: [b]}", "urls.denied"),
    ("metrics: {token_file: /x}", "metrics.token_file"),
    ("nats: {password: hunter2hunter2}", "nats.password"),
])
def test_an_unknown_key_is_refused_with_its_path(tmp_path: Path, text: str, path: str) -> None:
    (tmp_path / "k.yaml").write_text(text)
    with pytest.raises(KitsuneError) as caught:
        load_config(tmp_path / "k.yaml", {})
    assert caught.value.code == "invalid_config"
    assert caught.value.message.startswith(f"{path}: unknown key")  # and the closest key (test_config_names)


@pytest.mark.parametrize(("text", "path"), [
    ("read_only: 'yes'", "read_only"),
    ("max_body_bytes: '100'", "max_body_bytes"),
    ("caps: core", "caps"),
    ("urls: {deny: 10.0.0.0/8}", "urls.deny"),
    ("agents: [{name: 7, token: aaaaaaaaaaaaaaaa}]", "agents.0.name"),
    ("nats: {user: [a], password_env: P}", "nats.user"),
])
def test_a_value_of_the_wrong_type_is_refused_with_its_path_and_not_its_value(tmp_path: Path, text: str,
                                                                             path: str) -> None:
    (tmp_path / "k.yaml").write_text(text)
    with pytest.raises(KitsuneError) as caught:
        load_config(tmp_path / "k.yaml", {"P": "x" * 20})
    assert caught.value.message.startswith(f"{path}: ")
    assert "10.0.0.0" not in caught.value.message and "100" not in caught.value.message


def test_the_environment_overrides_the_file_for_every_key(tmp_path: Path) -> None:
    (tmp_path / "k.yaml").write_text(
        "fleet: filed\ncaps: [core]\nread_only: false\nurls: {allow: [a.test], deny: [b.test]}\n"
        "workflows: ./filed\naudit_file: filed.jsonl\nmax_body_bytes: 10\nuser_tabs_writable: false\n"
        "nats: {url: 'nats://filed:4222'}\n")
    config = load_config(tmp_path / "k.yaml", {
        "KITSUNE_FLEET": "env", "KITSUNE_CAPS": "core,automation", "KITSUNE_READ_ONLY": "1",
        "KITSUNE_URLS__DENY": "c.test, 10.0.0.0/8", "KITSUNE_WORKFLOWS": "./env", "KITSUNE_AUDIT_FILE": "env.jsonl",
        "KITSUNE_MAX_BODY_BYTES": "20", "KITSUNE_USER_TABS_WRITABLE": "true", "KITSUNE_NATS__URL": "nats://env:4222",
        "KITSUNE_CHROMIUM": "/not/config", "KITSUNE_SOMETHING_ELSE": "ignored"})
    node, policy = config.node, config.policy
    assert (node.fleet, policy.caps, policy.read_only) == ("env", frozenset({"core", "automation"}), True)
    assert (policy.urls.allow, policy.urls.deny) == (("a.test",), ("c.test", "10.0.0.0/8"))  # key by key
    assert (config.workflows, node.audit_file) == (Path("env"), Path("env.jsonl"))
    assert (config.http.max_body_bytes, policy.user_tabs_writable, node.nats.url) == (20, True, "nats://env:4222")
    allowed = load_config(tmp_path / "k.yaml", {"KITSUNE_URLS__ALLOW": '["x.test"]'}).policy.urls.allow
    assert allowed == ("x.test",)  # JSON too


def test_a_misspelt_variable_of_a_section_is_refused_and_a_bad_value_names_its_key() -> None:
    with pytest.raises(KitsuneError) as misspelt:
        load_config(None, {"KITSUNE_URLS__DENIED": "a.test"})
    assert misspelt.value.message == "urls.denied: unknown key; did you mean deny?"
    with pytest.raises(KitsuneError) as bad:
        load_config(None, {"KITSUNE_MAX_BODY_BYTES": "lots"})
    assert bad.value.message.startswith("max_body_bytes: ")


def test_nats_credentials_come_from_the_file_and_the_password_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("x")
    (tmp_path / "k.yaml").write_text(f"nats: {{user: node, password_env: NATS_PW, tls_ca_file: {tmp_path}/ca.pem}}")
    config = load_config(tmp_path / "k.yaml", {"NATS_PW": "pw-canary-0123456789"})
    auth = config.node.nats.auth
    assert (auth.user, auth.password, auth.tls_ca_file) == ("node", "pw-canary-0123456789", tmp_path / "ca.pem")
    assert "pw-canary" not in repr(config)
    seed = tmp_path / "node.nk"
    seed.write_text("SU...")
    assert load_config(None, {"KITSUNE_NATS__NKEY_SEED_FILE": str(seed)}).node.nats.auth.nkey_seed_file == seed


@pytest.mark.parametrize(("nats", "env", "wrong"), [
    ("{user: node}", {}, "nats: user and password_env go together"),
    ("{user: node, password_env: NATS_PW}", {}, "nats: environment variable NATS_PW is not set"),
    ("{creds_file: /no/such.creds}", {}, "nats: creds_file: no file /no/such.creds"),
    ("{creds_file: /etc/hostname, user: u, password_env: P}", {"P": "p"}, "one of creds_file, nkey_seed_file or user"),
])
def test_nats_settings_that_cannot_work_are_refused(tmp_path: Path, nats: str, env: dict[str, str],
                                                    wrong: str) -> None:
    (tmp_path / "k.yaml").write_text(f"nats: {nats}")
    with pytest.raises(KitsuneError) as caught:
        load_config(tmp_path / "k.yaml", env)
    assert wrong in caught.value.message


def test_a_given_environment_is_the_only_one_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITSUNE_FLEET", "from-the-process")
    monkeypatch.setenv("KITSUNE_AGENTS", "not-a-pair")
    assert load_config(None, {}).node.fleet == "kitsune"


def test_a_continuation_token_lives_60_s_unless_the_file_or_the_environment_says_otherwise(tmp_path: Path) -> None:
    assert load_config(None, {}).node.site_tools.continuation_ttl == 60.0
    (tmp_path / "k.yaml").write_text("site_tools: {continuation_ttl: 5}\n")
    assert load_config(tmp_path / "k.yaml", {}).node.site_tools.continuation_ttl == 5.0
    env = {"KITSUNE_SITE_TOOLS__CONTINUATION_TTL": "2.5"}
    assert load_config(tmp_path / "k.yaml", env).node.site_tools.continuation_ttl == 2.5
    with pytest.raises(KitsuneError) as bad:
        load_config(None, {"KITSUNE_SITE_TOOLS__CONTINUATION_TTL": "0"})
    assert bad.value.message.startswith("site_tools.continuation_ttl: ")


def test_live_view_links_start_with_the_public_url_when_one_is_set(tmp_path: Path) -> None:
    assert load_config(None, {}).node.live_view.public_url is None
    (tmp_path / "k.yaml").write_text("live_view: {public_url: 'https://kitsune.example.com/'}\n")
    assert load_config(tmp_path / "k.yaml", {}).node.live_view.public_url == "https://kitsune.example.com"
    env = {"KITSUNE_LIVE_VIEW__PUBLIC_URL": "http://10.0.0.5:8080/k"}
    assert load_config(None, env).node.live_view.public_url == "http://10.0.0.5:8080/k"
    for bad in ("ftp://kitsune.example.com", "https://kitsune.example.com/?x=1", "https://", "kitsune.example.com"):
        with pytest.raises(KitsuneError) as refused:
            load_config(None, {"KITSUNE_LIVE_VIEW__PUBLIC_URL": bad})
        assert refused.value.message.startswith("live_view.public_url: "), bad


def test_the_audit_file_is_in_the_node_s_directory_unless_configured(tmp_path: Path) -> None:
    """The documented default (README's tour, the configuration reference): ``kitsune-audit.jsonl`` in the directory
    the node runs in; a configured path is kept as given, a relative one from that directory too (not the file's)."""
    assert load_config(None, {}).node.audit_file == Path("kitsune-audit.jsonl")
    (tmp_path / "k.yaml").write_text(f"audit_file: {tmp_path / 'audit.jsonl'}\n")
    assert load_config(tmp_path / "k.yaml", {}).node.audit_file == tmp_path / "audit.jsonl"
    (tmp_path / "k.yaml").write_text("audit_file: logs/audit.jsonl\n")
    assert load_config(tmp_path / "k.yaml", {}).node.audit_file == Path("logs/audit.jsonl")
    assert load_config(None, {"KITSUNE_AUDIT_FILE": "/var/log/k.jsonl"}).node.audit_file == Path("/var/log/k.jsonl")
