// Package deploytest tests the files under deploy/: the Helm chart rendered
// with Helm's own engine and linter, the plain Kubernetes manifests, the
// Cloud Foundry manifest and the Dockerfile. Every Kubernetes object is
// decoded strictly into its k8s.io/api type (an unknown or misspelt field
// fails), and every gateway.yaml a deployment carries is loaded with the
// gateway's own config package, with the environment the deployment gives
// it. Then the properties the README promises are checked on the objects:
// operation locks that survive restarts and rollouts, an admin port that
// needs a token and is kept private, a pod that runs as non-root on a
// read-only root file system and drains before it stops.
//
// It is a module of its own so that Helm and the Kubernetes API types stay
// out of the gateway's go.mod; .ci/run and the README's test command run it
// with: cd deploy/test && go test ./...
package deploytest
