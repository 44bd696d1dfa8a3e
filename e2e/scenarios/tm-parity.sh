#!/usr/bin/env bash
# Scenario 5: `topoalign tm merge-cases` against the kubelet's own Topology Manager code.
#
# tmparity (e2e/go/cmd/tmparity) reads the kubelet's policy test tables from the
# k8s.io/kubernetes source, adds a configuration grid and random cases, decides each with
# the kubelet's NewManager + policy Merge, and compares topoalign's answers. Zero
# differences is the acceptance; each difference is printed with a shrunk reproducer.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"

D=$SCEN_DIR
T=$(now)
if ! (cd "$E2E_DIR/go" && "$TOOLS_BIN/tmparity" gen --out "$D" --random "${TM_PARITY_CASES:-20000}"); then
  fail "tm-parity: generating cases with the kubelet's code failed"
  exit 1
fi
pass "tm-parity: kubelet answered $(wc -l < "$D/cases.jsonl") cases in $(since "$T") s"

if "$TOOLS_BIN/tmparity" selftest --dir "$D"; then :; else fail "tm-parity: the comparison does not detect altered answers"; fi

need_topoalign_cmd tm merge-cases
T=$(now)
if ! "$TOPOALIGN" tm merge-cases --input "$D/cases.jsonl" -o json > "$D/topoalign.json" 2> "$D/topoalign.err"; then
  fail "tm-parity: topoalign tm merge-cases failed: $(head -c 2000 "$D/topoalign.err")"
  exit 1
fi
figure "topoalign tm merge-cases answered in $(since "$T") s"
if (cd "$E2E_DIR/go" && "$TOOLS_BIN/tmparity" compare --dir "$D" --topoalign-out "$D/topoalign.json" --topoalign-bin "$TOPOALIGN"); then
  pass "tm-parity: topoalign agrees with the kubelet's Topology Manager on every case"
else
  fail "tm-parity: topoalign differs from the kubelet's Topology Manager (reproducers above; files in $D)"
fi
