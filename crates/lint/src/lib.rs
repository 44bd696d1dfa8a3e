//! Linting of Pod/Deployment/Job/MPIJob/ResourceClaimTemplate manifests for topology-alignment problems.
