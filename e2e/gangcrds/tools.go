//go:build tools

// Package tools pins what the gang scenario's dialect part needs from the Go module
// proxy: controller-gen (sigs.k8s.io/controller-tools), which generates Volcano's Job
// CRD from volcano.sh/apis the way Volcano's own `make manifests` does, and the KAI
// scheduler module, whose source carries its CRDs (deployments/kai-scheduler/crds).
package tools

import (
	_ "github.com/NVIDIA/KAI-scheduler/pkg/apis/kai/v1alpha1"
	_ "github.com/NVIDIA/KAI-scheduler/pkg/apis/scheduling/v2alpha2"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)
