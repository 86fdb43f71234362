"""Readers of deploy/ for the tests of tests/static: the Dockerfile's instructions, compose's and the
Kubernetes manifests' documents, env.example's values, and a node's configuration as the loader reads it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kitsune.config import load_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, (keyword, rest), continuation lines joined and comments left out."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in (DEPLOY / "Dockerfile").read_text().splitlines()
                                             if not line.lstrip().startswith("#")))
    return [(keyword.upper(), rest.strip()) for keyword, _, rest in
            (line.strip().partition(" ") for line in joined.splitlines() if line.strip())]


def instructions(keyword: str) -> list[str]:
    return [rest for kind, rest in dockerfile() if kind == keyword]


def exec_form(keyword: str) -> list[str]:
    """The one ``keyword`` instruction (CMD, ENTRYPOINT), in exec form."""
    [text] = instructions(keyword)
    command: list[str] = json.loads(text)
    return command


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return document


def compose_nodes() -> dict[str, dict[str, Any]]:
    return {name: service for name, service in compose()["services"].items() if name.startswith("kitsune-")}


def env_example() -> dict[str, str]:
    lines = (DEPLOY / "env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def manifests() -> list[tuple[Path, dict[str, Any]]]:
    """Every object of deploy/kubernetes that Kubernetes is given (not the chart's values, not a scrape job)."""
    return [(path, document) for path in sorted(KUBERNETES.glob("*.yaml"))
            if path.name not in ("nats-values.yaml", "prometheus-scrape.yaml")
            for document in yaml.safe_load_all(path.read_text())]


def kubernetes() -> dict[str, dict[str, Any]]:
    """deploy/kubernetes/kitsune.yaml's objects by kind (one of each, Services by name)."""
    objects: dict[str, dict[str, Any]] = {}
    for document in yaml.safe_load_all((KUBERNETES / "kitsune.yaml").read_text()):
        kind = document["kind"] if document["kind"] != "Service" else f"Service/{document['metadata']['name']}"
        assert kind not in objects
        objects[kind] = document
    return objects


SECRET_KEYS = {"agents": "KITSUNE_AGENTS", "metrics-token": "KITSUNE_SCRAPE_TOKEN",
               "nats-password": "NATS_NODE_PASSWORD", "operator-token": "KITSUNE_OPERATOR_TOKEN",
               "persist-key": "KITSUNE_PERSIST_KEY"}
"""Each key of Secret kitsune-secrets (made as deploy/kubernetes/kitsune.yaml says) and env.example's
variable for the same secret: the tests give the pods env.example's values."""


def pod_env(container: Mapping[str, Any], pod: str = "kitsune-0") -> dict[str, str]:
    """The container's environment: its values, its secretKeyRefs read from env.example, the pod's name ``pod``."""
    example, env = env_example(), {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        elif item["valueFrom"].get("fieldRef") == {"fieldPath": "metadata.name"}:
            env[item["name"]] = pod
        else:
            reference = item["valueFrom"]["secretKeyRef"]
            assert reference["name"] == "kitsune-secrets"
            env[item["name"]] = example[SECRET_KEYS[reference["key"]]]
    return env


def node_config(path: Path, env: Mapping[str, str]) -> Any:
    """``load_config`` of a node's file, with ``env`` as its environment."""
    return load_config(path, env)
