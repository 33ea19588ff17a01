// Validates Kubernetes manifests with the kubernetes-models packages: the
// API's own kinds against its OpenAPI schemas, the ServiceMonitor against
// the Prometheus Operator's CRD schema (@kubernetes-models/prometheus-operator).
//
//   node tests/kubernetes/validate.mjs FILE.yaml...
//
// Prints one JSON line per document ({file, kind, name, errors}); exits 1
// when any document fails or has a kind no package models.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const CRDS = { "monitoring.coreos.com": "@kubernetes-models/prometheus-operator" };

async function model(apiVersion, kind) {
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  const pkg = CRDS[group] ?? "kubernetes-models";
  try {
    const mod = await import(`${pkg}/${apiVersion}/${kind}`);
    return mod[kind];
  } catch {
    return undefined;
  }
}

let failed = false;
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    const obj = doc.toJS();
    if (obj === null) continue;
    const line = { file, kind: obj.kind, name: obj.metadata?.name, errors: [] };
    if (doc.errors.length) line.errors.push(...doc.errors.map((e) => e.message));
    const Model = await model(obj.apiVersion, obj.kind);
    if (!Model) {
      line.errors.push(`no schema for ${obj.apiVersion} ${obj.kind}`);
    } else {
      try {
        new Model(obj).validate();
      } catch (e) {
        line.errors.push(e.message);
      }
    }
    failed ||= line.errors.length > 0;
    console.log(JSON.stringify(line));
  }
}
process.exit(failed ? 1 : 0);
