// Only marks the module root. Each supported Kubernetes version has its own
// module file, versions/VERSION.mod (and .sum), which scripts/control-plane.sh
// passes to go with -modfile; go does not read this file then. To work on
// policy-status-controller with go or gopls, set for example
// GOFLAGS=-modfile=versions/v1.37.2.mod.
module gpu-policy/tests/control-plane

go 1.26.0
