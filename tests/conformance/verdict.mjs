// Strict verdict over one leg's results, run by tests/conformance/run with the
// pinned Node 22:
//
//   node verdict.mjs RESULTS_DIR BASELINE_YAML
//
// The suite's own --expected-failures verdict scores only the scenarios a
// requirement set counts; extension and pending scenarios can fail without
// changing its exit code. This applies the same baseline rules to every
// scenario that ran (a check fails when its status is FAILURE or WARNING):
//   - `scenario` entry: the scenario may fail; listed but passing is stale.
//   - `scenario:check-id` entry: that check may fail; listed but SUCCESS is stale.
//   - entries naming scenarios that did not run in this leg are ignored.
// Prints one line per scenario that failed, was excused or scored no check, then
// `verdict: P passed, F failed, E excused, S stale`; exits 1 on F or S > 0.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const [resultsDir, baselinePath] = process.argv.slice(2);
if (!resultsDir || !baselinePath) {
  console.error('usage: node verdict.mjs RESULTS_DIR BASELINE_YAML');
  process.exit(2);
}
// `yaml` is a dependency of the suite, installed beside it in .work/.
const require = createRequire(join(import.meta.dirname, '.work', 'package.json'));
const YAML = require('yaml');

const baseline = YAML.parse(readFileSync(baselinePath, 'utf8')) ?? {};
const entries = (baseline.server ?? []).map(String);
const wholeScenario = new Set(entries.filter((e) => !e.includes(':')));
const perCheck = new Map();
for (const entry of entries.filter((e) => e.includes(':'))) {
  const [scenario, check] = [entry.slice(0, entry.indexOf(':')), entry.slice(entry.indexOf(':') + 1)];
  if (!perCheck.has(scenario)) perCheck.set(scenario, new Set());
  perCheck.get(scenario).add(check);
}

const isFailing = (check) => check.status === 'FAILURE' || check.status === 'WARNING';
const describe = (check) =>
  `${check.id} ${check.status}${check.errorMessage ? `: ${String(check.errorMessage).slice(0, 240)}` : ''}`;

let passed = 0, failed = 0, excused = 0, stale = 0;
const dirs = existsSync(resultsDir) ? readdirSync(resultsDir).sort() : [];
for (const dir of dirs) {
  const file = join(resultsDir, dir, 'checks.json');
  if (!existsSync(file)) continue;
  const scenario = dir.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
  const checks = JSON.parse(readFileSync(file, 'utf8'));
  const failing = checks.filter(isFailing);
  if (wholeScenario.has(scenario)) {
    if (failing.length > 0) {
      excused++;
      console.log(`  ~ ${scenario} (expected failure: ${failing.map((c) => c.id).join(', ')})`);
    } else {
      stale++;
      console.log(`  ! ${scenario} passes but is listed in ${baselinePath}: remove the entry`);
    }
    continue;
  }
  const allowed = perCheck.get(scenario) ?? new Set();
  const unexpected = failing.filter((c) => !allowed.has(c.id));
  const expected = failing.filter((c) => allowed.has(c.id));
  for (const id of allowed) {
    const seen = checks.filter((c) => c.id === id && c.status !== 'INFO');
    if (seen.length > 0 && seen.every((c) => c.status === 'SUCCESS')) {
      stale++;
      console.log(`  ! ${scenario}:${id} passes but is listed in ${baselinePath}: remove the entry`);
    }
  }
  if (unexpected.length > 0) {
    failed++;
    console.log(`  ✗ ${scenario}`);
    for (const check of unexpected) console.log(`      ${describe(check)}`);
  } else if (expected.length > 0) {
    excused++;
    console.log(`  ~ ${scenario} (expected failures: ${expected.map((c) => c.id).join(', ')})`);
  } else {
    passed++;
    // Visible, not failing: a scenario that ran no scored check at all
    // (e.g. it bailed out as not applicable) is worth a look when the same
    // scenario scores checks elsewhere (directly against the fixture).
    if (!checks.some((c) => c.status === 'SUCCESS')) {
      const kinds = [...new Set(checks.map((c) => c.status))].join('/') || 'none';
      console.log(`  ? ${scenario} passed no check (statuses: ${kinds})`);
    }
  }
}
if (dirs.length === 0) {
  console.log(`  no results under ${resultsDir}`);
  failed++;
}
console.log(`verdict: ${passed} passed, ${failed} failed, ${excused} excused, ${stale} stale`);
process.exit(failed > 0 || stale > 0 ? 1 : 0);
