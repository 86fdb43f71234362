"""Misspelt settings (issue 29, section 7): a ``KITSUNE_*`` variable that is no setting is named, one close
to a setting that guards the node refuses to start, an unknown key names the closest, a YAML error its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from kitsune.config import load_config
from kitsune.config_env import stray_variables
from messages.errors import KitsuneError


@pytest.mark.parametrize(("variable", "meant"), [
    ("KITSUNE_READONLY", "KITSUNE_READ_ONLY"), ("KITSUNE_read_only_mode", "KITSUNE_READ_ONLY"),
    ("KITSUNE_ASK_BEFORE_ACTING", "KITSUNE_ASK_BEFORE_ACT"), ("KITSUNE_URL__DENY", "KITSUNE_URLS__DENY"),
    ("KITSUNE_CAP", "KITSUNE_CAPS"), ("KITSUNE_USERTABS_WRITABLE", "KITSUNE_USER_TABS_WRITABLE"),
    ("KITSUNE_LIVEVIEW", "KITSUNE_LIVE_VIEW"), ("KITSUNE_OPERATOR", "KITSUNE_OPERATORS"),
    ("KITSUNE_AGENT", "KITSUNE_AGENTS"), ("KITSUNE_METRIC_TOKEN", "KITSUNE_METRICS_TOKEN"),
])
def test_a_variable_close_to_a_guarding_setting_is_refused_naming_the_setting(variable: str, meant: str) -> None:
    with pytest.raises(KitsuneError) as caught:
        load_config(None, {variable: "1"})
    assert caught.value.code == "invalid_config"
    assert caught.value.message.startswith(f"{variable}: not a setting; did you mean {meant}? (refused")


def test_other_stray_variables_are_warned_of_and_settings_and_known_variables_are_not() -> None:
    env = {"KITSUNE_SOMETHING_ELSE": "x", "KITSUNE_MAX_TAB": "3", "KITSUNE_READ_ONLY": "1", "KITSUNE_CHROMIUM": "/c",
           "KITSUNE_TOKEN": "t", "KITSUNE_APPROVAL_WAIT": "5", "KITSUNE_TEST_NATS_URL": "n", "KITSUNE_CAPS": "core",
           "KITSUNE_AGENTS": "a=aaaaaaaaaaaaaaaa", "KITSUNE_METRICS_TOKEN": "m" * 16, "KITSUNE_URLS__DENY": "a.test",
           "KITSUNE_NATS__URL": "nats://x:4222", "PATH": "/bin"}
    assert stray_variables(env) == ["KITSUNE_MAX_TAB is not a setting and is ignored (did you mean KITSUNE_MAX_TABS?)",
                                    "KITSUNE_SOMETHING_ELSE is not a setting and is ignored"]
    assert load_config(None, env).policy.read_only  # a warning, no refusal


@pytest.mark.parametrize(("text", "message"), [
    ("readonly: true", "readonly: unknown key; did you mean read_only?"),
    ("agents: [{name: a, token: aaaaaaaaaaaaaaaa, readonly: true}]", "agents.0.readonly: unknown key; did you mean "
                                                                     "read_only?"),
    ("urls: {denied: [a.test]}", "urls.denied: unknown key; did you mean deny?"),
    ("live_view: {enable: false}", "live_view.enable: unknown key; did you mean enabled?"),
    ("nats: {creds: /x}", "nats.creds: unknown key; did you mean creds_file?"),
    ("zebra: 1", "zebra: unknown key"),
])
def test_an_unknown_key_names_the_closest_known_key(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "k.yaml").write_text(text)
    with pytest.raises(KitsuneError) as caught:
        load_config(tmp_path / "k.yaml", {})
    assert caught.value.message == message


@pytest.mark.parametrize(("text", "where"), [
    ("fleet: a\nagents: [{name: a, token: secret-value-0123456789\n", "line 3, column 1"),
    ("fleet: a\nread_only: true: false\n", "line 2, column 16"),
])
def test_a_yaml_error_says_its_line_and_column_and_never_the_text_there(tmp_path: Path, text: str, where: str) -> None:
    (tmp_path / "k.yaml").write_text(text)
    with pytest.raises(KitsuneError) as caught:
        load_config(tmp_path / "k.yaml", {})
    assert caught.value.message.startswith(f"{tmp_path / 'k.yaml'} at {where}: "), caught.value.message
    assert "secret-value" not in caught.value.message
