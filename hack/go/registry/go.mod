// Wrapper module for an in-memory OCI distribution registry (go-containerregistry's
// pkg/registry), pinned so builds are reproducible: the simulated cluster's image registry.
module gpu-operator/hack/go/registry

go 1.26.0

require github.com/google/go-containerregistry v0.22.1
