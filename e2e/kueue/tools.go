//go:build tools

// Package tools pins the Kueue controller manager the gang scenario runs
// (`sigs.k8s.io/kueue/cmd/kueue`), built from the Go module proxy by e2e/lib/build.sh.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
