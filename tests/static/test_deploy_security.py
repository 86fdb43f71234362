"""What a careful cluster checks in deploy/ (issue 34): every Kubernetes manifest valid for a fixed
Kubernetes version with unknown fields refused (kubernetes-validate's offline schemas; the
ServiceMonitor against the fields of its CRD), Pod Security "restricted" met by every pod, Chromium's
sandbox kept (no --no-sandbox, a seccomp profile that lets it make user namespaces), probes on
/livez and /readyz, the drain wired to termination, the NetworkPolicies, and no secret written in."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from kitsune.cli import _parser
from tests.static import deploy_files as files
from tests.static.deploy_files import DEPLOY, KUBERNETES

KUBERNETES_VERSION = "1.35"
"""The version the manifests are validated for (and the namespace's Pod Security labels name)."""
SECCOMP = DEPLOY / "seccomp" / "kitsune-chromium.json"
DRAIN_MARGIN = 15
"""Seconds a pod's grace period leaves beyond the drain deadline: the saves, the claims' release, the exit."""
SECRET_NAMES = re.compile(r"TOKEN|PASSWORD|KEY|AGENTS")


def _secret_ref(name: str, key: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["name", "key"],
            "properties": {"name": {"const": name}, "key": {"const": key}, "optional": {"type": "boolean"}}}


_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_DURATION = r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
_RELABELING = {"type": "object", "additionalProperties": False, "properties": {
    "sourceLabels": {"type": "array", "items": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"}},
    "targetLabel": {"type": "string"}, "regex": {"type": "string"}, "replacement": {"type": "string"},
    "action": {"type": "string"}}}
SERVICE_MONITOR = {
    "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"}, "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name", "namespace"], "properties": {
            "name": {"type": "string"}, "namespace": {"type": "string"}, "labels": _LABELS}},
        "spec": {"type": "object", "additionalProperties": False, "required": ["selector", "endpoints"], "properties": {
            "jobLabel": {"type": "string"},
            "selector": {"type": "object", "additionalProperties": False, "properties": {"matchLabels": _LABELS}},
            "namespaceSelector": {"type": "object", "additionalProperties": False, "properties": {
                "any": {"type": "boolean"}, "matchNames": {"type": "array", "items": {"type": "string"}}}},
            "endpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False, "properties": {
                    "port": {"type": "string"}, "path": {"type": "string"},
                    "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
                    "interval": {"type": "string", "pattern": _DURATION},
                    "authorization": {"type": "object", "additionalProperties": False, "properties": {
                        "type": {"type": "string"}, "credentials": _secret_ref("kitsune-secrets", "metrics-token")}},
                    "relabelings": {"type": "array", "items": _RELABELING}}}}}}}}
"""The fields of ServiceMonitor (monitoring.coreos.com/v1) this repository uses, as the CRD of the Prometheus
Operator (0.84, example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml) publishes them;
kubernetes-validate ships no schema for custom resources. Unknown fields are refused here too."""


def _validate(document: dict[str, Any]) -> None:
    if document["kind"] == "ServiceMonitor":
        jsonschema.Draft202012Validator(SERVICE_MONITOR).validate(document)
    else:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


def test_every_manifest_is_valid_for_the_kubernetes_version_with_unknown_fields_refused() -> None:
    kinds = set()
    for path, document in files.manifests():
        try:
            _validate(document)
        except (kubernetes_validate.ValidationError, jsonschema.ValidationError) as e:
            pytest.fail(f"{path.name}: {document['kind']} {document['metadata']['name']}: {e}")
        kinds.add(document["kind"])
    assert kinds == {"Namespace", "ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget", "NetworkPolicy",
                     "ServiceMonitor", "Job"}


@pytest.mark.parametrize("kind", ["StatefulSet", "ServiceMonitor"])
def test_the_validation_refuses_a_misspelt_field(kind: str) -> None:
    """The check is strict: one field misspelt in the pod's security context, or in the scrape endpoint."""
    [document] = [d for _, d in files.manifests() if d["kind"] == kind]
    if kind == "StatefulSet":
        document["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsNonroot"] = True
    else:
        document["spec"]["endpoints"][0]["bearerTokenSecrets"] = {"name": "kitsune-secrets", "key": "metrics-token"}
    with pytest.raises((kubernetes_validate.ValidationError, jsonschema.ValidationError)):
        _validate(document)


# --- Pod Security "restricted" ------------------------------------------------------------------

RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def _pods() -> Iterator[tuple[str, dict[str, Any]]]:
    for _, document in files.manifests():
        if document["kind"] in ("StatefulSet", "Job"):
            yield document["metadata"]["name"], document["spec"]["template"]["spec"]


def _restricted_violations(spec: Mapping[str, Any]) -> list[str]:
    """What the Pod Security standard "restricted" refuses in a pod ``spec`` (its checks on these fields)."""
    pod = spec.get("securityContext", {})
    found = [f"volume {v['name']}" for v in spec.get("volumes", []) if not set(v) - {"name"} <= RESTRICTED_VOLUMES]
    found += [flag for flag in ("hostNetwork", "hostPID", "hostIPC") if spec.get(flag)]
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        own = container.get("securityContext", {})
        if own.get("runAsNonRoot", pod.get("runAsNonRoot")) is not True:
            found.append(f"{container['name']}: runAsNonRoot")
        if own.get("runAsUser", pod.get("runAsUser")) == 0:
            found.append(f"{container['name']}: runAsUser 0")
        if own.get("allowPrivilegeEscalation") is not False or own.get("privileged"):
            found.append(f"{container['name']}: privilege escalation")
        if own.get("capabilities", {}).get("drop") != ["ALL"] or set(own.get("capabilities", {}).get("add", [])) - {
                "NET_BIND_SERVICE"}:
            found.append(f"{container['name']}: capabilities")
        if own.get("seccompProfile", pod.get("seccompProfile", {})).get("type") not in ("RuntimeDefault", "Localhost"):
            found.append(f"{container['name']}: seccomp")
        if container.get("ports") and any("hostPort" in port for port in container["ports"]):
            found.append(f"{container['name']}: hostPort")
    return found


def test_the_namespace_enforces_pod_security_restricted_and_every_pod_meets_it() -> None:
    [namespace] = [d for _, d in files.manifests() if d["kind"] == "Namespace"]
    labels = namespace["metadata"]["labels"]
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"
        assert labels[f"pod-security.kubernetes.io/{mode}-version"] == f"v{KUBERNETES_VERSION}"
    assert {d["metadata"].get("namespace") for _, d in files.manifests() if d["kind"] != "Namespace"} == {
        namespace["metadata"]["name"]}
    pods = dict(_pods())
    assert set(pods) == {"kitsune", "kitsune-provision"}
    for name, spec in pods.items():
        assert _restricted_violations(spec) == [], name
        assert spec["automountServiceAccountToken"] is False
        assert all(c["securityContext"]["readOnlyRootFilesystem"] is True for c in spec["containers"]), name


def test_the_nats_chart_runs_every_container_under_restricted_too() -> None:
    """The chart's servers share the namespace: its pod template and its three containers (server,
    config reloader, exporter) are given what restricted requires; its nats-box is off."""
    values = yaml.safe_load((KUBERNETES / "nats-values.yaml").read_text())
    spec = {"securityContext": values["podTemplate"]["merge"]["spec"]["securityContext"],
            "containers": [{"name": part, **values[part]["merge"]}
                           for part in ("container", "reloader", "promExporter")]}
    assert _restricted_violations(spec) == []
    assert values["natsBox"] == {"enabled": False}


# --- Chromium's sandbox, the image --------------------------------------------------------------

def test_chromium_keeps_its_sandbox_under_a_seccomp_profile_that_allows_user_namespaces() -> None:
    """No --no-sandbox anywhere in deploy/, a non-root user (the driver adds the flag as root only), and
    the profile the pods and compose run under: not Unconfined, user namespaces allowed, the rest refused."""
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
            assert "--no-sandbox" not in code and "unconfined" not in code.lower(), path
    [user] = files.instructions("USER")
    assert int(user.split(":")[0]) > 0
    profile = json.loads(SECCOMP.read_text())
    refused = {name for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ERRNO" for name in rule["names"]}
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW" and all(rule["action"] == "SCMP_ACT_ERRNO"
                                                                  for rule in profile["syscalls"])
    assert not {"clone", "clone3", "unshare", "chroot", "seccomp", "prctl"} & refused  # the sandbox's own calls
    assert {"mount", "pivot_root", "setns", "kexec_load", "init_module", "bpf", "ptrace", "keyctl",
            "open_by_handle_at", "userfaultfd", "perf_event_open", "io_uring_setup", "reboot"} <= refused
    pod = files.kubernetes()["StatefulSet"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "Localhost", "localhostProfile": SECCOMP.name}
    for service in files.compose_nodes().values():
        assert f"seccomp=./{SECCOMP.relative_to(DEPLOY)}" in service["security_opt"]
        assert "no-new-privileges:true" in service["security_opt"] and service["cap_drop"] == ["ALL"]


def test_an_init_process_reaps_chromiums_children_in_the_image() -> None:
    assert files.exec_form("ENTRYPOINT") == ["/usr/bin/tini", "--"]
    assert any("apt-get install" in run and "tini" in shlex.split(run) for run in files.instructions("RUN"))
    assert files.exec_form("CMD")[:2] == ["kitsune", "serve"]
    assert all("init" not in service for service in files.compose_nodes().values())  # tini already; not a second one
    env = dict(item.split("=", 1) for kind, rest in files.dockerfile() if kind == "ENV" for item in shlex.split(rest))
    assert env["TMPDIR"] == "/tmp" and env["XDG_CACHE_HOME"].startswith("/tmp/")  # the root may be read-only


# --- probes and health checks -------------------------------------------------------------------

def _node_container() -> dict[str, Any]:
    containers: list[dict[str, Any]] = files.kubernetes()["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    [container] = containers
    return container


def test_liveness_never_depends_on_nats_and_readiness_does() -> None:
    """/livez for liveness and start-up (a NATS outage must not restart a node), /readyz for readiness; the
    compose health check is /readyz (compose restarts nothing for it), the image's /livez."""
    container = _node_container()
    port = container["ports"][0]["name"]
    assert {probe: container[probe]["httpGet"] for probe in ("startupProbe", "livenessProbe", "readinessProbe")} == {
        "startupProbe": {"path": "/livez", "port": port}, "livenessProbe": {"path": "/livez", "port": port},
        "readinessProbe": {"path": "/readyz", "port": port}}
    serve_port = container["ports"][0]["containerPort"]
    for service in files.compose_nodes().values():
        check = service["healthcheck"]["test"]
        assert check[0] == "CMD" and f"http://127.0.0.1:{serve_port}/readyz" in check[-1]
    assert f"http://127.0.0.1:{serve_port}/livez" in files.instructions("HEALTHCHECK")[0]


# --- drain on termination, rollout --------------------------------------------------------------

def _drain_args(command: list[str]) -> argparse.Namespace:
    """``kitsune drain``'s arguments: by the real parser once it has the command, else by its fixed interface
    (``--url``, ``--deadline SECONDS``, ``--wait``)."""
    assert command[:2] == ["kitsune", "drain"]
    if "drain" in next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices:
        return _parser().parse_args(command[1:])
    interface = argparse.ArgumentParser(exit_on_error=False)
    interface.add_argument("--url", default="http://127.0.0.1:8080")
    interface.add_argument("--deadline", type=float)
    interface.add_argument("--wait", action="store_true")
    return interface.parse_args(command[2:])


def test_termination_drains_the_node_within_the_grace_period() -> None:
    pod = files.kubernetes()["StatefulSet"]["spec"]["template"]["spec"]
    container = _node_container()
    env = files.pod_env(container)
    args = _drain_args(container["lifecycle"]["preStop"]["exec"]["command"])
    assert args.wait is True and args.url == f"http://127.0.0.1:{container['ports'][0]['containerPort']}"
    deadline = float(env["KITSUNE_DRAIN_DEADLINE"])
    assert args.deadline == deadline
    assert pod["terminationGracePeriodSeconds"] >= deadline + DRAIN_MARGIN
    config = files.node_config(DEPLOY / "kitsune.yaml", env)  # the operator the drain presents its token as
    [operator] = config.operators
    assert operator.secret_sha256 == hashlib.sha256(env["KITSUNE_OPERATOR_TOKEN"].encode()).digest()
    assert config.policy.caps == frozenset(env["KITSUNE_CAPS"].split(","))
    for service in files.compose_nodes().values():
        assert service["environment"]["KITSUNE_DRAIN_DEADLINE"] == env["KITSUNE_DRAIN_DEADLINE"]
        assert int(service["stop_grace_period"].removesuffix("s")) >= deadline + DRAIN_MARGIN


def test_the_rollout_and_the_budget_take_one_node_at_a_time() -> None:
    objects = files.kubernetes()
    spec = objects["StatefulSet"]["spec"]
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    assert objects["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1 < spec["replicas"]


# --- NetworkPolicy, ServiceMonitor --------------------------------------------------------------

def _policies() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d["spec"] for _, d in files.manifests() if d["kind"] == "NetworkPolicy"}


def _reachers(spec: Mapping[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Each port a policy opens and who may reach it."""
    opened: dict[int, list[dict[str, Any]]] = {}
    for rule in spec["ingress"]:
        for port in rule["ports"]:
            opened.setdefault(port["port"], []).extend(rule["from"])
    return opened


def test_only_the_nodes_reach_nats_and_only_the_ingress_and_prometheus_the_nodes() -> None:
    policies = {name: _reachers(spec) for name, spec in _policies().items()}
    nodes = {"matchLabels": files.kubernetes()["StatefulSet"]["spec"]["template"]["metadata"]["labels"]}
    [job] = [d for _, d in files.manifests() if d["kind"] == "Job"]
    nats = _policies()["nats"]["podSelector"]
    assert nats == {"matchLabels": {"app.kubernetes.io/name": "nats", "app.kubernetes.io/component": "nats"}}
    assert policies["nats"][4222] == [{"podSelector": nodes},
                                      {"podSelector": {"matchLabels": job["spec"]["template"]["metadata"]["labels"]}}]
    assert policies["nats"][6222] == [{"podSelector": nats}]
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                  "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    assert policies["nats"][7777] == [prometheus] and set(policies["nats"]) == {4222, 6222, 7777}
    assert _policies()["kitsune-http"]["podSelector"] == nodes
    assert policies["kitsune-http"] == {_node_container()["ports"][0]["containerPort"]: [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}, prometheus]}
    assert all(spec["policyTypes"] == ["Ingress"] for spec in _policies().values())


def test_the_service_monitor_scrapes_the_nodes_once_with_the_scrape_token_as_job_kitsune() -> None:
    objects = files.kubernetes()
    [monitor] = [d for _, d in files.manifests() if d["kind"] == "ServiceMonitor"]
    selected = [name for name, o in objects.items() if name.startswith("Service/")
                and monitor["spec"]["selector"]["matchLabels"].items() <= o["metadata"]["labels"].items()]
    assert selected == ["Service/kitsune"]  # job = the Service's name, as the node-down alert expects
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in objects["Service/kitsune"]["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    token = next(i for i in _node_container()["env"] if i["name"] == "KITSUNE_METRICS_TOKEN")
    assert endpoint["authorization"]["credentials"] == token["valueFrom"]["secretKeyRef"]


# --- secrets ------------------------------------------------------------------------------------

def test_secrets_come_from_secret_objects_and_deploy_env_never_from_the_files() -> None:
    assert "Secret" not in {d["kind"] for _, d in files.manifests()}  # kubectl create secret makes them
    for _, spec in _pods():
        for container in spec["containers"]:
            for item in container["env"]:
                if SECRET_NAMES.search(item["name"]):
                    assert set(item) == {"name", "valueFrom"} and "secretKeyRef" in item["valueFrom"], item
    example = files.env_example()
    assert {"KITSUNE_CAPS", "KITSUNE_PERSIST_KEY", "KITSUNE_OPERATOR_TOKEN"} <= set(example)
    for service in files.compose_nodes().values():
        env = service["environment"]
        assert {"KITSUNE_CAPS", "KITSUNE_PERSIST_KEY", "KITSUNE_OPERATOR_TOKEN"} <= set(env)
        for name, value in env.items():
            if SECRET_NAMES.search(name):
                assert re.fullmatch(r"\$\{\w+:\?set it in deploy/\.env\}", value), name
    assert files.pod_env(_node_container())["KITSUNE_CAPS"] == example["KITSUNE_CAPS"]


# --- the NATS chart's values --------------------------------------------------------------------

CHART = Path(__file__).parent / "nats_chart" / "values.yaml"
"""The official chart's default values (nats/nats 2.14.2, vendored: nats_chart/SOURCE.md). The chart ships no
values.schema.json: its defaults are the schema, every key ours sets must be one of them, of the same type."""


def _chart_violations(ours: Any, chart: Any, path: str = "values") -> Iterator[str]:
    """Where ``ours`` leaves the chart's values: an unknown key, or a type other than the default's (a ``{}``
    default, as ``merge``, ``env`` or ``resources``, takes any mapping; an empty default, any scalar)."""
    if isinstance(chart, dict):
        if not isinstance(ours, dict):
            yield f"{path}: a mapping in the chart"
        elif chart:
            for key, value in ours.items():
                if key in chart:
                    yield from _chart_violations(value, chart[key], f"{path}.{key}")
                else:
                    yield f"{path}.{key}: not a value of the chart"
    elif chart is None:
        if isinstance(ours, dict | list):
            yield f"{path}: a scalar in the chart"
    elif type(ours) is not type(chart):
        yield f"{path}: a {type(chart).__name__} in the chart, not a {type(ours).__name__}"


def test_the_nats_chart_values_are_the_official_chart_s_own_of_their_types() -> None:
    chart = yaml.safe_load(CHART.read_text())
    values = yaml.safe_load((KUBERNETES / "nats-values.yaml").read_text())
    assert list(_chart_violations(values, chart)) == []
    wrong = {"config": {"jetstream": {"enabled": "yes", "fileSize": 1}, "merge": []}, "natsBox": False}
    assert list(_chart_violations(wrong, chart)) == [
        "values.config.jetstream.enabled: a bool in the chart, not a str",
        "values.config.jetstream.fileSize: not a value of the chart", "values.config.merge: a mapping in the chart",
        "values.natsBox: a mapping in the chart"]
