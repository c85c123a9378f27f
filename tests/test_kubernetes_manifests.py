"""deploy/kubernetes/ against agent-sandbox's own CRD schemas (vendored in tests/data/agent-sandbox/,
Apache-2.0), the SandboxTemplate's pod against the Kubernetes PodSpec schema those CRDs embed,
and the daemon's flags in it against `exec-daemon serve` itself.

Validation is stricter than the API server's, like `kubectl apply --validate=strict`: an unknown
field is an error (the API server would drop it silently, and a misspelt securityContext field
would quietly leave the sandbox without what it needs).
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import click
import jsonschema
import pytest
import yaml

from exec_daemon.cli import serve
from exec_daemon.server import GRACEFUL_SECONDS, LAST_ANSWERS_SECONDS

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "deploy" / "kubernetes"
CRDS = Path(__file__).resolve().parent / "data" / "agent-sandbox"
# scripts/image/desktop-init reads the token from this file as root.
TOKEN_FILE_VARIABLE = "EXEC_DAEMON_AUTH_TOKEN_FILE"
GROUP_VERSION = "extensions.agents.x-k8s.io/v1beta1"
CRD_FILES = {
    "SandboxTemplate": "extensions.agents.x-k8s.io_sandboxtemplates.yaml",
    "SandboxWarmPool": "extensions.agents.x-k8s.io_sandboxwarmpools.yaml",
    "SandboxClaim": "extensions.agents.x-k8s.io_sandboxclaims.yaml",
}
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def strict(schema: Any) -> Any:
    """`schema` with unknown fields refused wherever it lists the known ones."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def load_crd(name: str) -> dict[str, Any]:
    # The C loader when PyYAML has it: the SandboxTemplate CRD is 400 kB.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((CRDS / name).read_text(), Loader=loader)  # type: ignore[no-any-return]


@functools.cache
def crd_schema(kind: str) -> dict[str, Any]:
    crd = load_crd(CRD_FILES[kind])
    assert crd["spec"]["names"]["kind"] == kind
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    return strict(version["schema"]["openAPIV3Schema"])  # type: ignore[no-any-return]


def errors_of(document: dict[str, Any]) -> list[str]:
    """Every way `document` breaks its kind's schema (empty: valid)."""
    kind = document.get("kind", "")
    if kind not in CRD_FILES or document.get("apiVersion") != GROUP_VERSION:
        return [f"not an agent-sandbox v1beta1 kind: {document.get('apiVersion')} {kind}"]
    validator = jsonschema.Draft7Validator(crd_schema(kind))
    found = [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(document)
    ]
    metadata = document.get("metadata", {})
    if not DNS_SUBDOMAIN.fullmatch(metadata.get("name", "")):
        found.append(f"metadata/name {metadata.get('name')!r} is not a DNS-1123 subdomain")
    if not DNS_LABEL.fullmatch(metadata.get("namespace", "")):
        found.append(f"metadata/namespace {metadata.get('namespace')!r} is not a DNS-1123 label")
    return found


def manifests() -> dict[str, dict[str, Any]]:
    """Every document of deploy/kubernetes/ by kind (one of each)."""
    by_kind: dict[str, dict[str, Any]] = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            assert document["kind"] not in by_kind, f"two {document['kind']}s"
            by_kind[document["kind"]] = document
    return by_kind


def container(template: dict[str, Any]) -> dict[str, Any]:
    (only,) = template["spec"]["podTemplate"]["spec"]["containers"]
    return only  # type: ignore[no-any-return]


def test_the_crds_are_vendored_with_their_licence() -> None:
    assert "Apache License" in (CRDS / "LICENSE").read_text()
    assert "2fd412d55ecae90861a101a5424a75473de97c36" in (CRDS / "README.md").read_text()
    for name in CRD_FILES.values():
        assert load_crd(name)["kind"] == "CustomResourceDefinition"


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_each_manifest_validates_against_its_crd(kind: str) -> None:
    document = manifests()[kind]
    assert errors_of(document) == []


def test_the_validation_refuses_what_the_api_server_would_refuse_or_drop() -> None:
    by_kind = manifests()
    broken: list[tuple[str, dict[str, Any]]] = []
    template = copy.deepcopy(by_kind["SandboxTemplate"])
    container(template)["securityContext"]["procMounts"] = "Unmasked"  # misspelt
    broken.append(("procMounts", template))
    template = copy.deepcopy(by_kind["SandboxTemplate"])
    del container(template)["name"]  # a PodSpec container must have a name
    broken.append(("name", template))
    template = copy.deepcopy(by_kind["SandboxTemplate"])
    container(template)["readinessProbe"]["periodSeconds"] = "two"
    broken.append(("periodSeconds", template))
    pool = copy.deepcopy(by_kind["SandboxWarmPool"])
    pool["spec"]["replicas"] = -1
    broken.append(("replicas", pool))
    claim = copy.deepcopy(by_kind["SandboxClaim"])
    del claim["spec"]["warmPoolRef"]
    broken.append(("warmPoolRef", claim))
    claim = copy.deepcopy(by_kind["SandboxClaim"])
    claim["spec"]["lifecycle"]["shutdownPolicy"] = "Never"
    broken.append(("shutdownPolicy", claim))
    for field, document in broken:
        found = errors_of(document)
        assert any(field in error for error in found), (field, found)


def test_the_pool_the_claim_and_the_template_name_each_other() -> None:
    by_kind = manifests()
    template, pool, claim = (
        by_kind["SandboxTemplate"],
        by_kind["SandboxWarmPool"],
        by_kind["SandboxClaim"],
    )
    assert pool["spec"]["sandboxTemplateRef"]["name"] == template["metadata"]["name"]
    assert claim["spec"]["warmPoolRef"]["name"] == pool["metadata"]["name"]
    namespaces = {d["metadata"]["namespace"] for d in (template, pool, claim)}
    assert len(namespaces) == 1


def serve_options(args: list[str]) -> dict[str, Any]:
    """What `exec-daemon serve` makes of `args` (a bad flag fails here as it would in the pod)."""
    assert args[0] == "serve"
    with serve.make_context("serve", list(args[1:])) as context:
        return dict(context.params)


def test_the_daemon_in_the_template_takes_its_flags_and_matches_ports_and_probes() -> None:
    template = manifests()["SandboxTemplate"]
    pod = template["spec"]["podTemplate"]["spec"]
    daemon = container(template)
    options = serve_options(daemon["args"])
    assert options["wait_for_init"] and options["auth_header"] == "x-exec-daemon-token"
    assert options["host"] == "0.0.0.0"
    ports = {port["name"]: port["containerPort"] for port in daemon["ports"]}
    assert ports == {
        "rpc": options["port"],
        "pty": options["pty_websocket_port"],
        "desktop": options["novnc_port"],
    }
    assert daemon["readinessProbe"]["httpGet"] == {"path": "/readyz?unclaimed=ok", "port": "rpc"}
    assert daemon["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "rpc"}
    # The drain and the last answers fit in the pod's grace period: SIGKILL cuts nothing short.
    shutdown = options["drain_grace_seconds"] + LAST_ANSWERS_SECONDS + GRACEFUL_SECONDS
    assert shutdown < pod["terminationGracePeriodSeconds"]
    # The pool's credential: a root-only file from a Secret, which the image's init reads.
    (token_file,) = daemon["env"]
    assert token_file["name"] == TOKEN_FILE_VARIABLE
    (mount,) = [m for m in daemon["volumeMounts"] if token_file["value"].startswith(m["mountPath"])]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["defaultMode"] == 0o400 and "runAsUser" not in pod["securityContext"]
    assert TOKEN_FILE_VARIABLE in (ROOT / "scripts" / "image" / "desktop-init").read_text()
    # What the command sandbox needs (sandbox/README.md), and a microVM runtime.
    security = daemon["securityContext"]
    assert pod["hostUsers"] is False and security["procMount"] == "Unmasked"
    assert security["capabilities"]["drop"] == ["ALL"]
    assert pod["runtimeClassName"].startswith("kata")
    ingress_ports = {
        port["port"]
        for rule in template["spec"]["networkPolicy"]["ingress"]
        for port in rule["ports"]
    }
    assert ingress_ports == set(ports.values())


def test_a_bad_flag_in_the_args_would_be_caught() -> None:
    with pytest.raises(click.UsageError):
        serve_options(["serve", "--wait-for-init", "--auth-header", "bad header"])
    with pytest.raises(click.UsageError):
        serve_options(["serve", "--wait-for-inits"])
