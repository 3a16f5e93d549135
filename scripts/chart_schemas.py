"""Validation of rendered chart manifests, shared by the blocks of
scripts/chart-check.sh: every manifest against the Kubernetes OpenAPI schemas
(strict), and the CRD kinds the Kubernetes schemas do not know against the
small schemas below. Must never pass a manifest it could not check: a kind
with no schema is a failure."""
import jsonschema
import kubernetes_validate.utils as kv

# Small schemas for the CRD kinds the Kubernetes schemas do not know. They pin
# the fields the chart relies on; KEDA's and the Prometheus Operator's own CRDs
# are not available offline.
SCALED_OBJECT = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["scaleTargetRef", "minReplicaCount", "maxReplicaCount",
                         "cooldownPeriod", "pollingInterval", "triggers"],
            "properties": {
                "scaleTargetRef": {
                    "type": "object", "additionalProperties": False,
                    "required": ["name"],
                    "properties": {"apiVersion": {"type": "string"},
                                   "kind": {"type": "string"},
                                   "name": {"type": "string", "minLength": 1}}},
                "minReplicaCount": {"type": "integer", "minimum": 0},
                "maxReplicaCount": {"type": "integer", "minimum": 1},
                "cooldownPeriod": {"type": "integer", "minimum": 0},
                "pollingInterval": {"type": "integer", "minimum": 1},
                "triggers": {
                    "type": "array", "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["type", "metadata"],
                        "properties": {
                            "type": {"const": "nats-jetstream"},
                            "metadata": {
                                "type": "object",
                                "additionalProperties": {"type": "string"},
                                "required": ["natsServerMonitoringEndpoint", "account",
                                             "stream", "consumer", "lagThreshold",
                                             "activationLagThreshold", "useHttps"],
                                "properties": {
                                    "lagThreshold": {"pattern": "^[0-9]+$"},
                                    "activationLagThreshold": {"pattern": "^[0-9]+$"},
                                    "useHttps": {"enum": ["true", "false"]}}}}}}}}}}
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {"type": "object", "required": ["matchLabels"]},
                "namespaceSelector": {"type": "object"},
                "endpoints": {
                    "type": "array", "minItems": 1,
                    "items": {"type": "object", "required": ["port"],
                              "properties": {"port": {"type": "string"},
                                             "path": {"type": "string"},
                                             "interval": {"type": "string"},
                                             "scrapeTimeout": {"type": "string"}}}}}}}}
CRDS = {("keda.sh/v1alpha1", "ScaledObject"): SCALED_OBJECT,
        ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR}


def invalid(docs, k8s_version):
    """One line per manifest of `docs` that fails its schema (empty: all valid)."""
    bad = []
    for d in docs:
        key = (d.get("apiVersion"), d.get("kind"))
        name = f'{d.get("kind")}/{d.get("metadata", {}).get("name")}'
        try:
            if key in CRDS:
                jsonschema.validate(d, CRDS[key])
            else:
                kv.validate(d, k8s_version, strict=True)
        except (jsonschema.ValidationError, kv.ValidationError) as e:
            bad.append(f"{name}: {e.message}")
        except kv.SchemaNotFoundError as e:
            bad.append(f"{name}: no schema ({e})")
    return bad
