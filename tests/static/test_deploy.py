"""deploy/ without a container runtime: every file parses; the command lines, ports and environment
it gives nodes are ones ``kitsune serve`` takes (the real argument parser and configuration loader);
the NATS configuration is the one ``kitsune fleet`` runs, and ``nats-server -t`` accepts it as each
server gets it."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from actors.nats_server import ADMIN_USER, NODE_USER, nats_server_binary, node_permissions
from core.settings import Settings
from kitsune.cli import _parser
from kitsune.fleet import FLEET, NATS_CONFIG, NODE_PASSWORD_ENV, ROUTE_USER, NatsMember, nats_environment
from messages.contract import CHECKPOINT_TTL
from tests.static.deploy_files import (
    DEPLOY,
    ROOT,
    compose,
    compose_nodes,
    dockerfile,
    env_example,
    exec_form,
    instructions,
    kubernetes,
    node_config,
    pod_env,
)

CONF = DEPLOY / "nats" / "nats-server.conf"
DOCKER_INSTRUCTIONS = {"FROM", "ARG", "RUN", "ENV", "WORKDIR", "COPY", "USER", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT",
                       "CMD"}


def _serve_args(command: list[str]) -> Any:
    """The real parser's reading of a container's command; it must be ``kitsune serve``."""
    assert command[0] == "kitsune"
    args = _parser().parse_args(command[1:])
    assert args.command == "serve"
    return args


def _interpolated(environment: Mapping[str, str], values: Mapping[str, str]) -> dict[str, str]:
    """Compose's ``${NAME}``, ``${NAME:?message}`` and ``${NAME:-default}`` resolved from ``values``."""
    def value(match: re.Match[str]) -> str:
        return values[match.group(1)]
    return {name: re.sub(r"\$\{(\w+)(?::?[-?][^}]*)?\}", value, str(text)) for name, text in environment.items()}


def _config_test(conf: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    binary = nats_server_binary()
    assert binary is not None
    return subprocess.run([str(binary), "-t", "-c", str(conf)], env=dict(env), capture_output=True, text=True,
                          check=False, timeout=30)


def _conf_permissions(text: str) -> Any:
    """The node user's permissions in the NATS configuration (written there as JSON)."""
    start = text.index("{", text.index("permissions:"))
    return json.JSONDecoder().raw_decode(text[start:])[0]


def _conf_variables() -> set[str]:
    text = "\n".join(line.split("#", 1)[0] for line in CONF.read_text().splitlines())
    return set(re.findall(r"(?<![\"\w])\$(\w+)", text))


def test_every_file_of_deploy_parses() -> None:
    documents = [document for path in sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
                 for document in yaml.safe_load_all(path.read_text())]
    assert len(documents) >= 10 and all(isinstance(document, dict) for document in documents)
    assert {kind for kind, _ in dockerfile()} <= DOCKER_INSTRUCTIONS
    assert CONF == NATS_CONFIG


# --- the image ----------------------------------------------------------------------------------

def test_the_image_is_debian_bookworm_with_its_chromium_and_runs_as_a_user_of_its_own() -> None:
    [base] = instructions("FROM")
    assert base.startswith("debian:bookworm")
    assert any("apt-get install" in run and "chromium" in shlex.split(run) for run in instructions("RUN"))
    assert any("pip install" in run and "-c constraints.txt ." in run for run in instructions("RUN"))
    [user] = instructions("USER")
    assert int(user.split(":")[0]) > 0


def test_the_image_serves_on_all_addresses_with_its_config_and_checks_livez_on_that_port() -> None:
    args = _serve_args(exec_form("CMD"))
    assert args.host == "0.0.0.0"
    assert instructions("EXPOSE") == [str(args.port)]
    [health] = instructions("HEALTHCHECK")
    assert f"http://127.0.0.1:{args.port}/livez" in health  # a NATS outage restarts no container
    copied = {destination: source for source, destination in
              (copy.split() for copy in instructions("COPY") if len(copy.split()) == 2)}
    assert copied[args.config] == "deploy/kitsune.yaml"


def test_the_image_copies_every_package_the_distribution_ships() -> None:
    shipped = {pattern.rstrip("*") for pattern in tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["packages"]["find"]["include"]}
    sources = {source.rstrip("/") for copy in instructions("COPY") for source in copy.split()[:-1]}
    assert shipped and shipped <= sources


def test_the_build_context_keeps_what_the_image_copies() -> None:
    kept = {line.removeprefix("!").rstrip("/") for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
            if line.startswith("!")}
    sources = {source.rstrip("/") for copy in instructions("COPY") for source in copy.split()[:-1]}
    assert sources <= kept


# --- compose ------------------------------------------------------------------------------------

def _compose_nats() -> dict[str, dict[str, Any]]:
    return {name: service for name, service in compose()["services"].items() if name.startswith("nats-")}


def test_compose_nodes_configure_a_node_that_joins_all_three_servers() -> None:
    nodes, servers = compose_nodes(), _compose_nats()
    assert len(nodes) >= 2 and len(servers) == 3
    client_port = {name: service["environment"]["NATS_LISTEN"].rsplit(":", 1)[1] for name, service in servers.items()}
    for service in nodes.values():
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert "command" not in service  # the image's own
        env = _interpolated(service["environment"], env_example())
        config = node_config(DEPLOY / "kitsune.yaml", env)
        assert config.node.nats.url == ",".join(f"nats://{name}:{port}" for name, port in client_port.items())
        _assert_a_fleet_node(config, env)
        assert config.node.nats.auth.password == env_example()["NATS_NODE_PASSWORD"]  # the servers' node password
    assert [node_config(DEPLOY / "kitsune.yaml", _interpolated(service["environment"], env_example())).node.name
            for service in nodes.values()] == list(nodes)  # each its stable name, the service's


def _assert_a_fleet_node(config: Settings, env: Mapping[str, str]) -> None:
    """The configuration of a node of the deployed fleet: the NATS user's password, the agents, a scrape token."""
    assert config.node.fleet == FLEET
    assert config.node.nats.auth.user == NODE_USER
    assert config.node.nats.auth.password == env[NODE_PASSWORD_ENV]
    assert {agent.name for agent in config.agents} == {"planner", "crawler"} and config.generated_token is None
    assert config.http.metrics_token_sha256 is not None


def test_compose_nats_servers_each_run_the_shared_configuration(tmp_path: Path) -> None:
    example = env_example()
    for name, service in _compose_nats().items():
        assert service["command"] == ["nats-server", "-c", "/etc/nats/kitsune/nats-server.conf"]
        assert "./nats:/etc/nats/kitsune:ro" in service["volumes"]
        env = _interpolated(service["environment"], example)
        assert set(env) == _conf_variables() and env["NATS_SERVER_NAME"] == name
        assert env["NATS_NODE_PASSWORD"] == example["NATS_NODE_PASSWORD"]
        routes = sorted(env[f"NATS_ROUTE_{i}"] for i in (1, 2, 3))
        assert routes == [f"nats://{ROUTE_USER}:{example['NATS_ROUTE_PASSWORD']}@{other}:6222"
                          for other in sorted(_compose_nats())]
        answer = _config_test(CONF, {**env, "NATS_STORE_DIR": str(tmp_path)})
        assert answer.returncode == 0, answer.stderr


def test_compose_prometheus_scrapes_every_node_with_the_scrape_token_and_the_repositorys_rules() -> None:
    document = compose()
    prometheus = document["services"]["prometheus"]
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    assert "../prometheus/kitsune.rules.yaml:/etc/prometheus/kitsune.rules.yaml:ro" in prometheus["volumes"]
    assert config["rule_files"] == ["kitsune.rules.yaml"]
    [job] = config["scrape_configs"]
    assert job["job_name"] == yaml.safe_load((ROOT / "prometheus" / "prometheus.yml").read_text())[
        "scrape_configs"][0]["job_name"]
    port = _serve_args(exec_form("CMD")).port
    assert job["static_configs"][0]["targets"] == [f"{name}:{port}" for name in compose_nodes()]
    [secret] = prometheus["secrets"]
    assert job["authorization"] == {"type": "Bearer", "credentials_file": f"/run/secrets/{secret}"}
    assert document["secrets"][secret] == {"environment": "KITSUNE_SCRAPE_TOKEN"}
    assert all(service["environment"]["KITSUNE_METRICS_TOKEN"].startswith("${KITSUNE_SCRAPE_TOKEN")
               for service in compose_nodes().values())


def test_compose_grafana_mounts_the_provisioning_and_the_dashboards_where_they_are_looked_for() -> None:
    grafana = compose()["services"]["grafana"]
    provider = yaml.safe_load((ROOT / "grafana" / "provisioning" / "dashboards" / "kitsune.yaml").read_text())
    dashboards = provider["providers"][0]["options"]["path"]
    assert set(grafana["volumes"]) == {"../grafana/provisioning:/etc/grafana/provisioning:ro",
                                       f"../grafana/dashboards:{dashboards}:ro"}
    assert grafana["environment"]["PROMETHEUS_URL"] == "http://prometheus:9090"


# --- Kubernetes ---------------------------------------------------------------------------------

def test_kubernetes_nodes_run_kitsune_serve_with_the_configmap_and_the_secret(tmp_path: Path) -> None:
    objects = kubernetes()
    pod = objects["StatefulSet"]["spec"]["template"]
    [container] = pod["spec"]["containers"]
    args = _serve_args(container["args"])
    assert args.host == "0.0.0.0" and container["args"] == exec_form("CMD")
    [port] = container["ports"]
    assert port["containerPort"] == args.port
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    [(name, document)] = objects["ConfigMap"]["data"].items()
    assert Path(mount["mountPath"]) / name == Path(args.config)
    (tmp_path / name).write_text(document)
    env = pod_env(container)
    config = node_config(tmp_path / name, env)
    _assert_a_fleet_node(config, env)
    assert config.node.name == "kitsune-0"  # each pod's name: stable across its restarts
    assert config.node.nats.url == ",".join(f"nats://nats-{i}.nats-headless:4222" for i in range(3))
    image = yaml.safe_load((DEPLOY / "kitsune.yaml").read_text())
    assert {**yaml.safe_load(document), "nats": image["nats"]} == image | {"nats": image["nats"]}
    assert pod["spec"]["securityContext"]["runAsUser"] == int(instructions("USER")[0].split(":")[0])


def test_kubernetes_services_and_budget_reach_the_nodes() -> None:
    objects = kubernetes()
    statefulset = objects["StatefulSet"]
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    for service in ("Service/kitsune", "Service/kitsune-headless"):
        assert objects[service]["spec"]["selector"] == labels
        assert objects[service]["spec"]["ports"][0]["targetPort"] == container["ports"][0]["name"]
    assert statefulset["spec"]["serviceName"] == "kitsune-headless"
    assert objects["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == labels
    annotations = statefulset["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(container["ports"][0]["containerPort"])
    scrape = yaml.safe_load((DEPLOY / "kubernetes" / "prometheus-scrape.yaml").read_text())
    assert scrape["scrape_configs"][0]["job_name"] == "kitsune"


def test_an_mcp_client_sticks_to_one_node_in_compose_and_on_kubernetes() -> None:
    """An MCP session and its direct calls' checkpoints live in one node's process (README: Resume and sticky
    clients): compose publishes each node on a host port of its own, and the Kubernetes Service keeps a
    client's address on one pod for longer than a checkpoint lives."""
    serve_port = str(_serve_args(exec_form("CMD")).port)
    published = [service["ports"] for service in compose_nodes().values()]
    assert all(len(ports) == 1 and ports[0].rsplit(":", 1)[1] == serve_port for ports in published), published
    host_ports = [ports[0].rsplit(":", 2)[-2] for ports in published]
    assert len(set(host_ports)) == len(host_ports), host_ports
    service = kubernetes()["Service/kitsune"]["spec"]
    assert service["sessionAffinity"] == "ClientIP"
    assert service["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] > CHECKPOINT_TTL


def test_the_nats_chart_values_give_the_nodes_user_the_same_account_and_password(tmp_path: Path) -> None:
    values = yaml.safe_load((DEPLOY / "kubernetes" / "nats-values.yaml").read_text())
    assert values["config"]["cluster"] == {"enabled": True, "replicas": 3}
    assert values["config"]["jetstream"]["enabled"] is True
    [user, admin] = values["config"]["merge"]["accounts"]["KITSUNE"]["users"]
    assert user["user"] == NODE_USER and user["permissions"] == node_permissions(FLEET)
    assert admin == {"user": ADMIN_USER, "password": "<< $NATS_ADMIN_PASSWORD >>"}  # provision's, no node's
    objects = kubernetes()
    [container] = objects["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    nodes_password = next(item for item in container["env"] if item["name"] == NODE_PASSWORD_ENV)
    assert values["container"]["env"]["NATS_NODE_PASSWORD"] == {"valueFrom": nodes_password["valueFrom"]}
    # the chart writes << $X >> unquoted: what it renders of the account, nats-server accepts
    rendered = re.sub(r'"<< (\$\w+) >>"', r"\1", json.dumps({"accounts": values["config"]["merge"]["accounts"]}))
    (tmp_path / "accounts.conf").write_text(rendered)
    answer = _config_test(tmp_path / "accounts.conf", {"NATS_NODE_PASSWORD": "node-change-me-0123456789",
                                                       "NATS_ADMIN_PASSWORD": "admin-change-me-0123456789"})
    assert answer.returncode == 0, answer.stderr


# --- the NATS configuration, and the local launcher ---------------------------------------------

def test_the_nats_configuration_gives_the_node_user_what_the_embedded_server_gives_a_node() -> None:
    text = CONF.read_text()
    assert f"user: {NODE_USER}" in text and f"user: {ROUTE_USER}" in text
    assert _conf_permissions(text) == node_permissions(FLEET)
    assert not any("UPDATE" in subject or "DELETE" in subject or "PURGE" in subject
                   for subject in node_permissions(FLEET)["publish"]["allow"])
    assert {"$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>",
            "$JS.API.STREAM.MSG.DELETE.>"} <= set(node_permissions(FLEET)["publish"]["deny"])
    assert f"user: {ADMIN_USER}\n        password: $NATS_ADMIN_PASSWORD\n" in text


def test_the_streams_are_provisioned_by_the_administrator_whom_no_node_is_given() -> None:
    """compose's ``provision`` service and the Kubernetes Job run ``kitsune provision`` with the
    administrator's password before the nodes; no node's environment holds that password."""
    provision = compose()["services"]["provision"]
    args = _parser().parse_args(provision["command"][1:])
    assert provision["command"][0] == "kitsune" and args.command == "provision"
    assert args.nats_url.count("nats://") == 3 and "NATS_ADMIN_PASSWORD" in provision["environment"]
    for node in compose_nodes().values():
        assert node["depends_on"]["provision"] == {"condition": "service_completed_successfully"}
        assert not any("ADMIN" in str(value) for value in node["environment"].values())
    job = next(d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "provision.yaml").read_text())
               if d["kind"] == "Job")
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert _parser().parse_args(container["args"][1:]).command == "provision"
    assert [e["name"] for e in container["env"]] == ["NATS_ADMIN_PASSWORD"]
    [node] = kubernetes()["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    assert all(item["valueFrom"]["secretKeyRef"]["name"] != "kitsune-nats-admin" for item in node["env"]
               if "secretKeyRef" in item.get("valueFrom", {}))


def test_the_launcher_gives_each_server_every_variable_of_the_configuration_and_nats_server_accepts_it(
        tmp_path: Path) -> None:
    cluster = [NatsMember(f"nats-{i}", 4222 + i, 6222 + i, 8222 + i) for i in (1, 2, 3)]
    for member in cluster:
        env = nats_environment(member, cluster, tmp_path / member.name, route_password="route-pass-0123456789",
                               node_password="k0123456789abcdef", admin_password="k-admin-0123456789")
        assert set(env) == _conf_variables()
        answer = _config_test(NATS_CONFIG, env)
        assert answer.returncode == 0, answer.stderr


def test_promtool_accepts_the_compose_prometheus_configuration_with_the_repositorys_rules(tmp_path: Path) -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    token = tmp_path / "kitsune-scrape-token"  # the compose secret's file, which promtool wants to exist
    token.write_text("scrape-change-me-0123456789\n")
    config["scrape_configs"][0]["authorization"]["credentials_file"] = str(token)
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "kitsune.rules.yaml").write_text((ROOT / "prometheus" / "kitsune.rules.yaml").read_text())
    answer = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                            text=True, check=False, timeout=60)
    assert answer.returncode == 0, answer.stdout + answer.stderr
