// Package controllers holds the reconcilers of the agents.managed-agents.io kinds, one file
// per kind: they turn Agent, Environment and Session resources into API objects through
// internal/sessions (the service the REST API uses, never HTTP) and mirror the API objects
// back into the resources' status.
package controllers
