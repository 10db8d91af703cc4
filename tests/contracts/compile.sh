#!/usr/bin/env bash
# Regenerates tests/contracts/compiled.json ({name: {"abi": [...], "bytecode": "0x..."}}) from TraceTarget.sol with
# the pinned solcjs (scripts/bootstrap dev installs it). The output is committed so the tests never compile.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
solcjs="$root/tests/tools/node_modules/.bin/solcjs"
python="$root/.venv/bin/python"
if [ ! -x "$solcjs" ]; then
    echo "solcjs not found at $solcjs: run scripts/bootstrap dev" >&2
    exit 1
fi

# solcjs has no --evm-version flag, so the settings go in through standard JSON.
standard_input='
import json, sys
source = open(sys.argv[1]).read()
json.dump({
    "language": "Solidity",
    "sources": {"TraceTarget.sol": {"content": source}},
    "settings": {
        "evmVersion": "prague",
        "optimizer": {"enabled": True, "runs": 200},
        "outputSelection": {"*": {"*": ["abi", "evm.bytecode.object"]}},
    },
}, sys.stdout)
'
collect_output='
import json, sys
# solcjs prints a notice about SMT solvers on stdout before the JSON document.
text = sys.stdin.read()
output = json.loads(text[text.index("{"):])
errors = [e for e in output.get("errors", []) if e["severity"] == "error"]
for e in output.get("errors", []):
    print(e["formattedMessage"], file=sys.stderr)
if errors:
    sys.exit(1)
contracts = output["contracts"]["TraceTarget.sol"]
compiled = {
    name: {"abi": c["abi"], "bytecode": "0x" + c["evm"]["bytecode"]["object"]}
    for name, c in sorted(contracts.items())
}
with open(sys.argv[1], "w") as f:
    json.dump(compiled, f, indent=1, sort_keys=True)
    f.write("\n")
'
"$python" -c "$standard_input" "$here/TraceTarget.sol" \
    | "$solcjs" --standard-json \
    | "$python" -c "$collect_output" "$here/compiled.json"
echo "wrote $here/compiled.json"
