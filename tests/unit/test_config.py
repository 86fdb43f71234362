"""The node's configuration: agents and tokens, capability groups, policy, the generated token file."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest

from bridge.config import load_config, write_token_file
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


def test_the_generated_token_file_is_readable_only_by_its_owner(tmp_path: Path) -> None:
    path = write_token_file("t" * 40, tmp_path / "state")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == "t" * 40


def test_caps_default_to_core_and_the_environment_chooses_them() -> None:
    assert load_config(None, {}).caps == {"core"}
    assert load_config(None, {"KITSUNE_CAPS": "core,automation"}).caps == {"core", "automation"}


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
