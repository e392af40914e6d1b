// Package tools runs the built-in tools (bash, read, write, edit, glob, grep) over a
// sandbox.Sandbox, each call recorded in the sandbox so a retried call runs exactly once.
// Tools use only Exec, ReadFile and WriteFile, and take an optional capability when the
// sandbox has one (sandbox.FileSearcher: glob and grep in one call instead of one round trip
// per file), with the same results either way. read returns PNG, JPEG, GIF and WebP images
// and PDFs as image and document blocks (Result.Content), within the Messages API's limits
// (builtin_media.go); limits.go exports the limits the model is told about. tools/toolstest
// is the suite every provider runs, both ways; tools/config parses, validates and resolves
// tool configuration.
//
// It imports sandbox, wire and tools/config; never agent, store, turns, durable, Temporal or Kubernetes.
package tools
