// Package wire holds the JSON shapes of the Managed Agents API (../shared/API.md): request
// bodies, resource objects, events, pages and the error envelope.
//
// It is the leaf of the dependency graph: it must never import store, httpapi, sessions,
// workflow, Temporal or Kubernetes packages.
package wire
